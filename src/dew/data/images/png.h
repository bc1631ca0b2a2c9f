#pragma once
// Images out: one PNG, or a labelled grid of samples (the preview a diffusion run writes and `dew sample`
// prints). Both written atomically (core/atomic_file.h): a kill leaves the old file or the new one.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace dew::data::images {

// image: uint8 [C, H, W] as is, or floating [C, H, W] in [-1, 1] mapped by round((x + 1) * 127.5) after
// clamping (the inverse of to_unit_range); [H, W] is one gray channel. C is 1 (gray), 2 (gray + alpha),
// 3 (RGB) or 4 (RGBA). Any device; the pixels are copied to the CPU.
void write_png(const std::filesystem::path& path, const at::Tensor& image);
// The PNG file's bytes, for callers that store them elsewhere.
std::string encode_png(const at::Tensor& image);

struct GridOptions {
  std::int64_t scale = 1;   // each image pixel drawn as scale x scale (nearest), so 28x28 samples are visible
  std::int64_t gutter = 2;  // px of background between cells and around the grid
};

// images: [N, C, H, W], C 1 or 3, floating in [-1, 1] or uint8, laid out `columns` per row (the last row
// may be short). row_labels: empty (no caption column) or one caption per row (ceil(N / columns)), drawn
// in black on white in a column on the left with stb_easy_font's built-in bitmap font, ASCII only (other
// bytes become '?'). The background and gutters are white.
void write_image_grid(const std::filesystem::path& path, const at::Tensor& images, std::int64_t columns,
                      const std::vector<std::string>& row_labels = {}, const GridOptions& options = {});

// The uint8 [C, H, W] canvas write_image_grid encodes (for tests and callers that add to it).
at::Tensor image_grid(const at::Tensor& images, std::int64_t columns, const std::vector<std::string>& row_labels = {},
                      const GridOptions& options = {});

}  // namespace dew::data::images
