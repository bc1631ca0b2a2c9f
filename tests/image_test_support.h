#pragma once
// A tiny IDX image set the image tests write: 4 classes of 8x8 images, each class a bright quadrant.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace dew::test {

inline void put_u32(std::ofstream& out, std::uint32_t v) {
  const unsigned char b[4] = {static_cast<unsigned char>(v >> 24), static_cast<unsigned char>(v >> 16),
                              static_cast<unsigned char>(v >> 8), static_cast<unsigned char>(v)};
  out.write(reinterpret_cast<const char*>(b), 4);
}

// prefix-images-idx3-ubyte and prefix-labels-idx1-ubyte with n images: class = i % 4, that quadrant bright.
inline void write_idx(const std::filesystem::path& dir, const std::string& prefix, int n) {
  std::ofstream images(dir / (prefix + "-images-idx3-ubyte"), std::ios::binary), labels(dir / (prefix + "-labels-idx1-ubyte"), std::ios::binary);
  put_u32(images, 0x803), put_u32(images, n), put_u32(images, 8), put_u32(images, 8);
  put_u32(labels, 0x801), put_u32(labels, n);
  for (int i = 0; i < n; ++i) {
    const int c = i % 4;
    for (int y = 0; y < 8; ++y) {
      for (int x = 0; x < 8; ++x) {
        const bool bright = (y / 4) == (c / 2) && (x / 4) == (c % 2);
        images.put(static_cast<char>(bright ? 200 + (i * 7 + x) % 50 : (i * 13 + y * 3 + x) % 40));
      }
    }
    labels.put(static_cast<char>(c));
  }
}

}  // namespace dew::test
