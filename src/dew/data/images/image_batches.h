#pragma once
// Batches of images for training and evaluation: {"images": float [B, C, S, S] in [-1, 1], "labels": int64 [B]}.
//
// Order, position and sharding are RecordSchedule's (record_order.h): epoch after epoch of a permutation of
// the chosen images drawn from (seed, epoch), one int64 position for all ranks together, rank r taking the
// global positions congruent to r modulo world. The random horizontal flip is a function of (seed, global
// position) alone, not a stream that advances, so a run resumed at any position flips exactly what an
// uninterrupted one would, on every rank count. Resizing or padding to `size` happens once, at construction.
//
// A validation split is the caller's choice: an `indices` subset (holdout_split below draws one), or a
// second ImageSet (the t10k file) in its own ImageBatches.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "dew/data/batch_source.h"
#include "dew/data/images/image_fit.h"
#include "dew/data/images/image_set.h"
#include "dew/data/record_order.h"

namespace dew::data::images {

struct ImageBatchOptions {
  std::uint64_t seed = 0;
  bool shuffle = true;        // false: index order, every epoch (validation)
  std::int64_t rank = 0;      // this process
  std::int64_t world = 1;     // process count
  std::int64_t size = 0;      // 0: as stored (images must be square only if the model says so); else S x S
  Fit fit = Fit::resize;      // how to reach `size`
  bool flip = false;          // random horizontal flip with probability 1/2
};

class ImageBatches : public BatchSource {
 public:
  // Every image of the set.
  explicit ImageBatches(ImageSet set, ImageBatchOptions options = {});
  // Only the images at `indices` (each in [0, set.size()), no repeats), record i being image indices[i].
  ImageBatches(ImageSet set, std::vector<std::int64_t> indices, ImageBatchOptions options = {});

  Batch next_batch(std::int64_t rows) override;
  std::int64_t position() const override { return schedule_.position(); }
  void set_position(std::int64_t position) override { schedule_.set_position(position); }
  std::int64_t records() const override { return schedule_.records(); }

  // The set as the batches see it (pixels already fitted to `size`).
  const ImageSet& images() const { return set_; }
  const ImageBatchOptions& options() const { return options_; }
  // Whether the image at a global position is flipped (a pure function of seed and position).
  bool flipped_at(std::int64_t position) const;

 private:
  ImageSet set_;
  std::vector<std::int64_t> indices_;  // record -> image index
  ImageBatchOptions options_;
  RecordSchedule schedule_;
};

// Splits [0, records) into (train, validation) index lists: round(val_fraction * records) indices drawn
// without replacement by (seed), the rest train; both ascending. val_fraction in [0, 1); a non-zero fraction
// always holds at least one image back, and never all of them.
std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> holdout_split(std::int64_t records, double val_fraction,
                                                                             std::uint64_t seed);

// uint8 pixels -> float in [-1, 1]: x / 127.5 - 1 (0 -> -1, 255 -> 1 exactly).
at::Tensor to_unit_range(const at::Tensor& pixels);

}  // namespace dew::data::images
