#include "dew/data/images/image_file.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"

#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_NO_STDIO  // decoded from memory: the file is read (and its errors named) by dew::read_file
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif
#include <stb/stb_image.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace dew::data::images {

at::Tensor read_image_file(const std::filesystem::path& path, int channels) {
  if (channels != 0 && channels != 1 && channels != 3) {
    dew::fail("cannot read '", path.string(), "' as ", channels, " channels: use 0 (as stored), 1 (gray) or 3 (RGB)");
  }
  std::string bytes = dew::read_file(path);
  if (bytes.size() > static_cast<std::size_t>(INT32_MAX)) dew::fail("'", path.string(), "' is too large to decode (over 2 GiB)");
  int width = 0, height = 0, stored = 0;
  unsigned char* decoded = stbi_load_from_memory(reinterpret_cast<const unsigned char*>(bytes.data()),
                                                 static_cast<int>(bytes.size()), &width, &height, &stored, channels);
  if (!decoded) {
    dew::fail("cannot decode '", path.string(), "' as a PNG or JPEG image (", stbi_failure_reason(),
              "); remove it or replace it with a readable image");
  }
  const int c = channels == 0 ? stored : channels;
  // stb returns interleaved [H, W, C]; dew's images are planar [C, H, W].
  at::Tensor interleaved = at::empty({height, width, c}, at::kByte);
  std::memcpy(interleaved.data_ptr<std::uint8_t>(), decoded, static_cast<std::size_t>(height) * width * c);
  stbi_image_free(decoded);
  return interleaved.permute({2, 0, 1}).contiguous();
}

bool is_image_file_name(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

}  // namespace dew::data::images
