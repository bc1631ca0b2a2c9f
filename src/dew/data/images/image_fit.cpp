#include "dew/data/images/image_fit.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "dew/core/error.h"

namespace dew::data::images {

Fit parse_fit(const std::string& name) {
  if (name == "resize") return Fit::resize;
  if (name == "pad") return Fit::pad;
  dew::fail("image fit '", name, "' is not one of: resize (bilinear), pad (centred on black)");
}

std::string to_string(Fit fit) { return fit == Fit::resize ? "resize" : "pad"; }

namespace {

at::Tensor resize_chunk(const at::Tensor& chunk, std::int64_t size) {
  const bool shrinks = chunk.size(2) > size || chunk.size(3) > size;
  at::Tensor input = chunk.to(at::kFloat);
  at::Tensor out = shrinks ? at::_upsample_bilinear2d_aa(input, {size, size}, /*align_corners=*/false)
                           : at::upsample_bilinear2d(input, {size, size}, /*align_corners=*/false);
  return out.round_().clamp_(0, 255).to(at::kByte);
}

}  // namespace

at::Tensor fit_images(const at::Tensor& pixels, std::int64_t size, Fit fit, const std::string& what) {
  if (pixels.dim() == 3) return fit_images(pixels.unsqueeze(0), size, fit, what).squeeze(0);
  if (pixels.dim() != 4 || pixels.scalar_type() != at::kByte) {
    dew::fail("fit_images expects uint8 [N, C, H, W] pixels, got ", pixels.sizes(), " ", pixels.scalar_type());
  }
  if (size < 1) dew::fail("image size ", size, " for ", what, " must be at least 1");
  const std::int64_t h = pixels.size(2), w = pixels.size(3);
  if (h == size && w == size) return pixels;
  if (fit == Fit::pad) {
    if (h > size || w > size) {
      dew::fail(what, " holds ", h, "x", w, " images, larger than the ", size, "x", size,
                " they are padded to; use fit resize, or a larger size");
    }
    at::Tensor out = at::zeros({pixels.size(0), pixels.size(1), size, size}, at::kByte);
    const std::int64_t top = (size - h) / 2, left = (size - w) / 2;
    out.narrow(2, top, h).narrow(3, left, w).copy_(pixels);
    return out;
  }
  // In chunks: the float copy of a whole data set would be four times its size.
  constexpr std::int64_t kChunk = 1024;
  std::vector<at::Tensor> parts;
  for (std::int64_t start = 0; start < pixels.size(0); start += kChunk) {
    parts.push_back(resize_chunk(pixels.narrow(0, start, std::min(kChunk, pixels.size(0) - start)), size));
  }
  return at::cat(parts, 0);
}

}  // namespace dew::data::images
