#include "dew/data/images/image_batches.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "dew/core/error.h"

namespace dew::data::images {

namespace {

// Distinct purposes draw from distinct streams of one seed: the shuffle uses the seed itself
// (record_order.cpp), the flip and the holdout these offsets of it.
constexpr std::uint64_t kFlipStream = 0x6A09E667F3BCC909ull;
constexpr std::uint64_t kHoldoutStream = 0xBB67AE8584CAA73Bull;

// SplitMix64's output function: a bijective, well-mixed hash of one 64-bit word.
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::vector<std::int64_t> all_indices(std::int64_t n) {
  std::vector<std::int64_t> indices(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) indices[static_cast<std::size_t>(i)] = i;
  return indices;
}

void check_indices(const std::vector<std::int64_t>& indices, std::int64_t size, const std::string& source) {
  std::vector<bool> taken(static_cast<std::size_t>(size), false);
  for (std::int64_t index : indices) {
    if (index < 0 || index >= size) dew::fail("image index ", index, " is outside ", source, ", which holds ", size, " images");
    if (taken[static_cast<std::size_t>(index)]) dew::fail("image index ", index, " of ", source, " is chosen twice");
    taken[static_cast<std::size_t>(index)] = true;
  }
}

ImageSet fitted(ImageSet set, const ImageBatchOptions& options) {
  if (!set.pixels.defined() || set.pixels.dim() != 4 || set.pixels.scalar_type() != at::kByte) {
    dew::fail("image batches need uint8 [N, C, H, W] pixels; ", set.source, " has none of that shape");
  }
  if (!set.labels.defined() || set.labels.dim() != 1 || set.labels.size(0) != set.pixels.size(0)) {
    dew::fail("image batches need one int64 label per image; ", set.source, " does not have them");
  }
  if (options.size > 0) set.pixels = fit_images(set.pixels, options.size, options.fit, set.source);
  set.labels = set.labels.to(at::kLong).contiguous();
  set.pixels = set.pixels.contiguous();
  return set;
}

}  // namespace

at::Tensor to_unit_range(const at::Tensor& pixels) { return pixels.to(at::kFloat).div_(127.5).sub_(1.0); }

ImageBatches::ImageBatches(ImageSet set, ImageBatchOptions options)
    : ImageBatches(set, all_indices(set.pixels.defined() ? set.pixels.size(0) : 0), options) {}

ImageBatches::ImageBatches(ImageSet set, std::vector<std::int64_t> indices, ImageBatchOptions options)
    : set_(fitted(std::move(set), options)),
      indices_(std::move(indices)),
      options_(options),
      schedule_(static_cast<std::int64_t>(indices_.size()), options.seed, options.shuffle, options.rank, options.world,
                dew::str(set_.source, " (", indices_.size(), " images)")) {
  check_indices(indices_, set_.pixels.size(0), set_.source);
}

bool ImageBatches::flipped_at(std::int64_t position) const {
  if (!options_.flip) return false;
  std::uint64_t key = mix64(options_.seed + kFlipStream) + static_cast<std::uint64_t>(position) * 0x9E3779B97F4A7C15ull;
  return (mix64(key) >> 63) != 0;
}

Batch ImageBatches::next_batch(std::int64_t rows) {
  if (rows >= 1 && rows * options_.world > records()) {
    dew::fail(set_.source, " has ", records(), " images for this loader, fewer than one batch of ", rows,
              options_.world > 1 ? dew::str(" rows per process x ", options_.world, " processes") : std::string(" images"),
              "; use a smaller batch_size or more images");
  }
  const std::int64_t first = schedule_.position() + options_.rank;  // this rank's first global position
  std::vector<std::int64_t> records = schedule_.next(rows);
  std::vector<std::int64_t> chosen(records.size());
  for (std::size_t j = 0; j < records.size(); ++j) chosen[j] = indices_[static_cast<std::size_t>(records[j])];
  at::Tensor index = at::tensor(chosen, at::kLong);
  at::Tensor pixels = set_.pixels.index_select(0, index);
  for (std::int64_t j = 0; j < rows; ++j) {
    if (flipped_at(first + j * options_.world)) pixels[j].copy_(pixels[j].flip({-1}));
  }
  Batch batch;
  batch.set("images", to_unit_range(pixels));
  batch.set("labels", set_.labels.index_select(0, index));
  return batch;
}

std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> holdout_split(std::int64_t records, double val_fraction,
                                                                             std::uint64_t seed) {
  if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
    dew::fail("val_fraction ", val_fraction, " must lie in [0, 1): the share of images held back for validation");
  }
  if (records < 1) dew::fail("cannot split ", records, " images");
  auto held = static_cast<std::int64_t>(std::llround(val_fraction * static_cast<double>(records)));
  if (val_fraction > 0.0) held = std::max<std::int64_t>(held, 1);
  if (held >= records) {
    dew::fail("val_fraction ", val_fraction, " of ", records, " images would leave none to train on; use a smaller fraction or more images");
  }
  std::vector<std::int64_t> order = shuffled_indices(records, seed + kHoldoutStream, 0);
  std::vector<std::int64_t> val(order.begin(), order.begin() + held), train(order.begin() + held, order.end());
  std::sort(val.begin(), val.end());
  std::sort(train.begin(), train.end());
  return {std::move(train), std::move(val)};
}

}  // namespace dew::data::images
