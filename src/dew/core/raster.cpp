#include "dew/core/raster.h"

#include <climits>

#include "dew/core/error.h"

// The stb headers' functions become static to this file, so no other file's copy can clash.
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#endif
#include <stb/stb_easy_font.h>
#include <stb/stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace dew {

namespace {

void append_bytes(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<std::size_t>(size));
}

// stb_easy_font indexes a table by (byte - 32): only printable ASCII may reach it.
std::string printable_ascii(const std::string& text) {
  std::string out = text;
  for (char& ch : out) {
    if (static_cast<unsigned char>(ch) < 32 || static_cast<unsigned char>(ch) > 126) ch = '?';
  }
  return out;
}

}  // namespace

std::string encode_png_bytes(const std::uint8_t* pixels, int width, int height, int channels, const std::string& what) {
  if (channels < 1 || channels > 4) fail(what, ": a PNG holds 1 to 4 channels, the image has ", channels);
  if (height < 1 || width < 1 || height > INT_MAX / std::max(width * channels, 1)) {
    fail(what, ": cannot encode a ", height, "x", width, " image");
  }
  std::string png;
  if (!stbi_write_png_to_func(append_bytes, &png, width, height, channels, pixels, width * channels)) {
    fail(what, ": stb_image_write could not encode a ", height, "x", width, "x", channels, " image");
  }
  return png;
}

std::vector<TextQuad> text_quads(const std::string& text) {
  std::string ascii = printable_ascii(text);
  std::vector<char> buffer(ascii.size() * 2048 + 1024);  // stb_easy_font silently truncates a short buffer
  const int quads = stb_easy_font_print(0, 0, ascii.data(), nullptr, buffer.data(), static_cast<int>(buffer.size()));
  struct Vertex {
    float x, y, z;
    std::uint8_t color[4];
  };
  const auto* v = reinterpret_cast<const Vertex*>(buffer.data());
  std::vector<TextQuad> out;
  out.reserve(static_cast<std::size_t>(quads));
  for (int q = 0; q < quads; ++q) out.push_back({v[4 * q].x, v[4 * q].y, v[4 * q + 2].x, v[4 * q + 2].y});
  return out;
}

int text_width(const std::string& text) {
  std::string ascii = printable_ascii(text);
  return stb_easy_font_width(ascii.data());
}

}  // namespace dew
