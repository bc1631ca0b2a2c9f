#pragma once
// One PNG or JPEG file decoded to pixels (stb_image). The only file that compiles stb_image, with its
// functions static (one-definition rule: another file may compile its own copy without a clash).
#include <ATen/core/Tensor.h>

#include <filesystem>

namespace dew::data::images {

// uint8 [C, H, W]. channels 0 keeps what the file stores (1 gray, 2 gray + alpha, 3 RGB, 4 RGBA); 1 or 3
// converts (stb's luma weights for gray). Fails naming the file and the decoder's reason.
at::Tensor read_image_file(const std::filesystem::path& path, int channels = 0);

// True for the names a directory reader takes as images: .png, .jpg, .jpeg in any letter case.
bool is_image_file_name(const std::filesystem::path& path);

}  // namespace dew::data::images
