#include "dew/data/images/png.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/core/raster.h"

namespace dew::data::images {

namespace {

// uint8 [C, H, W] on the CPU, contiguous, from any accepted input.
at::Tensor to_bytes(const at::Tensor& image, const char* what) {
  if (!image.defined()) dew::fail(what, ": no image (undefined tensor)");
  at::Tensor x = image.dim() == 2 ? image.unsqueeze(0) : image;
  if (x.dim() != 3) dew::fail(what, ": expected an image [C, H, W] or [H, W], got shape ", image.sizes());
  x = x.to(at::kCPU);
  if (x.scalar_type() == at::kByte) return x.contiguous();
  if (!at::isFloatingType(x.scalar_type())) {
    dew::fail(what, ": expected uint8 pixels or floating values in [-1, 1], got ", x.scalar_type());
  }
  // (x + 1) * 127.5 maps -1 -> 0 and 1 -> 255; NaN (a diverged sampler) becomes 0 rather than undefined.
  return x.to(at::kFloat).nan_to_num(-1.0).clamp(-1.0, 1.0).add(1.0).mul(127.5).round().to(at::kByte).contiguous();
}

// Draws `text` in black with its top-left at (x, y) at `scale`, into a uint8 [C, H, W] canvas.
void draw_text(at::Tensor& canvas, std::int64_t x, std::int64_t y, const std::string& text, std::int64_t scale) {
  const std::int64_t height = canvas.size(1), width = canvas.size(2);
  for (const TextQuad& q : text_quads(text)) {
    auto x0 = std::clamp<std::int64_t>(x + std::lround(q.x0 * static_cast<float>(scale)), 0, width);
    auto y0 = std::clamp<std::int64_t>(y + std::lround(q.y0 * static_cast<float>(scale)), 0, height);
    auto x1 = std::clamp<std::int64_t>(x + std::lround(q.x1 * static_cast<float>(scale)), 0, width);
    auto y1 = std::clamp<std::int64_t>(y + std::lround(q.y1 * static_cast<float>(scale)), 0, height);
    if (x1 > x0 && y1 > y0) canvas.narrow(1, y0, y1 - y0).narrow(2, x0, x1 - x0).fill_(0);
  }
}

}  // namespace

std::string encode_png(const at::Tensor& image) {
  at::Tensor bytes = to_bytes(image, "encode_png");
  const auto c = bytes.size(0), h = bytes.size(1), w = bytes.size(2);
  if (h > INT32_MAX || w > INT32_MAX || c > INT32_MAX) dew::fail("encode_png: cannot encode a ", h, "x", w, "x", c, " image");
  at::Tensor interleaved = bytes.permute({1, 2, 0}).contiguous();  // the PNG's rows are [W, C] interleaved
  return encode_png_bytes(interleaved.data_ptr<std::uint8_t>(), static_cast<int>(w), static_cast<int>(h), static_cast<int>(c), "encode_png");
}

void write_png(const std::filesystem::path& path, const at::Tensor& image) {
  std::string png;
  try {
    png = encode_png(image);
  } catch (const dew::Error& error) {
    dew::fail("cannot write '", path.string(), "': ", error.what());
  }
  write_file_atomic(path, png);
}

at::Tensor image_grid(const at::Tensor& images, std::int64_t columns, const std::vector<std::string>& row_labels,
                      const GridOptions& options) {
  if (!images.defined() || images.dim() != 4) {
    dew::fail("an image grid takes images [N, C, H, W], got ", images.defined() ? images.sizes() : at::IntArrayRef{});
  }
  const std::int64_t n = images.size(0), c = images.size(1), h = images.size(2), w = images.size(3);
  if (n < 1) dew::fail("an image grid needs at least one image");
  if (c != 1 && c != 3) dew::fail("an image grid takes 1 (gray) or 3 (RGB) channels, the images have ", c);
  if (columns < 1) dew::fail("an image grid needs at least 1 column, got ", columns);
  if (options.scale < 1 || options.scale > 64) dew::fail("grid scale ", options.scale, " must lie in [1, 64]");
  if (options.gutter < 0 || options.gutter > 64) dew::fail("grid gutter ", options.gutter, " must lie in [0, 64]");
  const std::int64_t cols = std::min(columns, n), rows = (n + columns - 1) / columns;
  if (!row_labels.empty() && static_cast<std::int64_t>(row_labels.size()) != rows) {
    dew::fail("an image grid of ", n, " images in ", columns, " columns has ", rows, " rows but ", row_labels.size(),
              " row labels were given; give one per row or none");
  }
  const std::int64_t g = options.gutter, cell_h = h * options.scale, cell_w = w * options.scale;
  // stb_easy_font capitals are 7 units tall: as large as fits the row, at most 3x (a caption, not a title).
  const std::int64_t text_scale = std::clamp<std::int64_t>(cell_h / 12, 1, 3);
  std::vector<std::string> captions;
  std::int64_t label_w = 0;
  for (const std::string& label : row_labels) {
    captions.push_back(label);
    label_w = std::max<std::int64_t>(label_w, text_width(captions.back()) * text_scale);
  }
  if (!captions.empty()) label_w += 2 * 4;  // 4 px of margin either side of the captions
  const std::int64_t width = label_w + g + cols * (cell_w + g), height = g + rows * (cell_h + g);

  at::Tensor canvas = at::full({c, height, width}, 255, at::kByte);
  at::Tensor pixels = images.to(at::kCPU);
  for (std::int64_t i = 0; i < n; ++i) {
    at::Tensor cell = to_bytes(pixels[i], "image grid");
    if (options.scale > 1) cell = cell.repeat_interleave(options.scale, 1).repeat_interleave(options.scale, 2);
    const std::int64_t top = g + (i / columns) * (cell_h + g), left = label_w + g + (i % columns) * (cell_w + g);
    canvas.narrow(1, top, cell_h).narrow(2, left, cell_w).copy_(cell);
  }
  for (std::int64_t r = 0; r < static_cast<std::int64_t>(captions.size()); ++r) {
    const std::int64_t top = g + r * (cell_h + g) + std::max<std::int64_t>(0, (cell_h - 7 * text_scale) / 2);
    draw_text(canvas, 4, top, captions[static_cast<std::size_t>(r)], text_scale);
  }
  return canvas;
}

void write_image_grid(const std::filesystem::path& path, const at::Tensor& images, std::int64_t columns,
                      const std::vector<std::string>& row_labels, const GridOptions& options) {
  at::Tensor canvas;
  try {
    canvas = image_grid(images, columns, row_labels, options);
  } catch (const dew::Error& error) {
    dew::fail("cannot write '", path.string(), "': ", error.what());
  }
  write_png(path, canvas);
}

}  // namespace dew::data::images
