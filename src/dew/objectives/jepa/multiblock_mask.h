#pragma once
// I-JEPA's multi-block masks over a grid of patches (Assran et al. 2023; facebookresearch/ijepa's
// MaskCollator): for a batch, `num_targets` target blocks per image, whose representations the predictor
// must produce, and `num_context` context blocks the context encoder sees, kept apart from the targets.
//
// Per batch, from one generator (the caller seeds it per step, so a resumed run draws the same masks):
//   1. one target block size: a uniform r gives scale = lerp(target_scale, r) and aspect = lerp(aspect, r);
//      the block has int(H W scale) patches at that height/width ratio (rounded, below the grid's size);
//      then one context block size the same way with aspect 1;
//   2. per image, each target block's top-left corner from randint(0, H - h) x randint(0, W - w) (as in the
//      reference: a block never touches the last row or column), then each context block likewise, minus
//      every target block unless allow_overlap; a context block must keep more than min_keep patches, and
//      after 20 failed tries it stops excluding the last target, then the next, ...;
//   3. every mask is cut to the smallest count of its kind in the batch, so the batch is rectangular.
// The draws are LibTorch's CPU generator's rand/randint in the reference's order, so the masks equal the
// reference's index for index on the same seed (tests/fixtures/jepa, tools/reference/make_jepa_mask_fixtures.py).
#include <ATen/ATen.h>

#include <cstdint>
#include <utility>

namespace dew::objectives::jepa {

struct MultiBlockMaskConfig {
  std::int64_t num_targets = 4;  // I-JEPA's npred
  std::int64_t num_context = 1;  // I-JEPA's nenc
  std::pair<double, double> target_scale{0.15, 0.2};   // share of the grid per target block
  std::pair<double, double> context_scale{0.85, 1.0};  // share of the grid per context block (before removal)
  std::pair<double, double> aspect{0.75, 1.5};         // target blocks' height / width
  std::int64_t min_keep = 4;  // a context block keeps more than this many patches
  bool allow_overlap = false;  // context blocks may cover target blocks

  // Refuses counts below 1, scales outside (0, 1], ranges given high-low, aspect <= 0, min_keep < 0, naming
  // `prefix`.field and the value.
  void validate(const char* prefix = "jepa") const;
};

struct BlockMasks {
  std::int64_t target_height = 0, target_width = 0;    // the batch's block sizes
  std::int64_t context_height = 0, context_width = 0;
  at::Tensor context;  // int64 [B, num_context, Kc]: row-major patch indices, increasing
  at::Tensor targets;  // int64 [B, num_targets, Kt]
};

// Masks for `batch` images on a `height` x `width` patch grid (both >= 2).
BlockMasks sample_block_masks(const MultiBlockMaskConfig& config, std::int64_t height, std::int64_t width, std::int64_t batch,
                              at::Generator& generator);

}  // namespace dew::objectives::jepa
