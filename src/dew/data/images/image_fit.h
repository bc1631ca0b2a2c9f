#pragma once
// Bringing images of one size to another: the model's input size is a config value, the data's is whatever
// the files hold.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace dew::data::images {

// resize: bilinear to size x size (the aspect ratio is not kept; antialiased when shrinking, like PIL and
// torchvision's antialias=True). pad: centred on a black (zero) size x size canvas, odd margins putting the
// extra pixel after the image; an image larger than size is refused.
enum class Fit { resize, pad };
Fit parse_fit(const std::string& name);  // "resize" | "pad", refused by name otherwise
std::string to_string(Fit fit);

// uint8 [N, C, H, W] (or [C, H, W]) -> uint8 of the same rank with H = W = size. Returns the input itself when
// it is already size x size. `what` names the data in errors ("'data/cats/a.png'").
at::Tensor fit_images(const at::Tensor& pixels, std::int64_t size, Fit fit, const std::string& what);

}  // namespace dew::data::images
