#include "dew/objectives/jepa/multiblock_mask.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <vector>

#include "dew/core/error.h"

namespace dew::objectives::jepa {

namespace {

struct Size {
  std::int64_t h, w;
};

// One uniform draw sets both the scale and the aspect ratio (the reference's _sample_block_size). float64
// arithmetic on the float32 draw, truncation and round-half-to-even as Python's int() and round() do.
Size block_size(at::Generator& generator, std::int64_t height, std::int64_t width, std::pair<double, double> scale,
                std::pair<double, double> aspect) {
  const double r = static_cast<double>(at::rand({1}, generator).item<float>());
  const double mask_scale = scale.first + r * (scale.second - scale.first);
  const auto max_keep = static_cast<std::int64_t>(static_cast<double>(height * width) * mask_scale);
  const double ratio = aspect.first + r * (aspect.second - aspect.first);
  auto h = static_cast<std::int64_t>(std::nearbyint(std::sqrt(static_cast<double>(max_keep) * ratio)));
  auto w = static_cast<std::int64_t>(std::nearbyint(std::sqrt(static_cast<double>(max_keep) / ratio)));
  while (h >= height) --h;
  while (w >= width) --w;
  return {h, w};
}

// torch.randint(0, high, (1,), generator=g) itself: ATen draws one 32-bit word from the CPU generator and
// takes it modulo the range (uniform_int_from_to_distribution, for ranges below 2^32). Drawn here directly:
// hundreds of one-element randint ops a batch cost a millisecond in dispatch alone.
std::int64_t draw_below(at::Generator& generator, std::int64_t high) {
  auto* cpu = at::check_generator<at::CPUGeneratorImpl>(generator);
  std::lock_guard<std::mutex> lock(generator.mutex());
  return static_cast<std::int64_t>(cpu->random() % static_cast<std::uint64_t>(high));
}

using Grid = std::vector<char>;  // row-major, 1 = in

struct Block {
  std::vector<std::int64_t> kept;  // row-major indices, increasing
  Grid complement;                 // the grid without the drawn rectangle
};

// The reference's _sample_block_mask: redraw until the block, restricted to the acceptable regions, keeps
// more than min_keep patches; every 20 failures drop one more region (the last first).
Block block_mask(at::Generator& generator, std::int64_t height, std::int64_t width, Size size, std::int64_t min_keep,
                 const std::vector<Grid>* acceptable) {
  std::int64_t tries = 0, timeout = 20;
  while (true) {
    const std::int64_t top = draw_below(generator, height - size.h);
    const std::int64_t left = draw_below(generator, width - size.w);
    Grid mask(static_cast<std::size_t>(height * width), 0);
    for (std::int64_t y = top; y < top + size.h; ++y) {
      for (std::int64_t x = left; x < left + size.w; ++x) mask[static_cast<std::size_t>(y * width + x)] = 1;
    }
    if (acceptable) {
      const auto regions = std::max<std::int64_t>(static_cast<std::int64_t>(acceptable->size()) - tries, 0);
      for (std::int64_t k = 0; k < regions; ++k) {
        const Grid& allowed = (*acceptable)[static_cast<std::size_t>(k)];
        for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = static_cast<char>(mask[i] & allowed[i]);
      }
    }
    Block block;
    for (std::size_t i = 0; i < mask.size(); ++i) {
      if (mask[i]) block.kept.push_back(static_cast<std::int64_t>(i));
    }
    if (static_cast<std::int64_t>(block.kept.size()) > min_keep) {
      block.complement.assign(static_cast<std::size_t>(height * width), 1);
      for (std::int64_t y = top; y < top + size.h; ++y) {
        for (std::int64_t x = left; x < left + size.w; ++x) block.complement[static_cast<std::size_t>(y * width + x)] = 0;
      }
      return block;
    }
    if (--timeout == 0) {
      ++tries;
      timeout = 20;
    }
  }
}

// [B, M, K] from per-image lists of masks, each cut to its first K indices.
at::Tensor collate(const std::vector<std::vector<std::vector<std::int64_t>>>& masks, std::int64_t keep) {
  const auto B = static_cast<std::int64_t>(masks.size()), M = static_cast<std::int64_t>(masks.front().size());
  auto out = at::empty({B, M, keep}, at::kLong);
  auto* p = out.data_ptr<std::int64_t>();
  for (const auto& image : masks) {
    for (const auto& mask : image) p = std::copy_n(mask.begin(), keep, p);
  }
  return out;
}

void check_range(const char* prefix, const char* field, std::pair<double, double> range, double low, double high) {
  if (!(range.first > low && range.first <= range.second && range.second <= high)) {
    fail(prefix, ".", field, " must be [min, max] with ", low, " < min <= max <= ", high, ", got [", range.first, ", ", range.second, "]");
  }
}

}  // namespace

void MultiBlockMaskConfig::validate(const char* prefix) const {
  if (num_targets < 1) fail(prefix, ".num_targets must be >= 1, got ", num_targets);
  if (num_context < 1) fail(prefix, ".num_context must be >= 1, got ", num_context);
  check_range(prefix, "target_scale", target_scale, 0.0, 1.0);
  check_range(prefix, "context_scale", context_scale, 0.0, 1.0);
  check_range(prefix, "aspect", aspect, 0.0, 1e9);
  if (min_keep < 0) fail(prefix, ".min_keep must be >= 0, got ", min_keep);
}

BlockMasks sample_block_masks(const MultiBlockMaskConfig& config, std::int64_t height, std::int64_t width, std::int64_t batch,
                              at::Generator& generator) {
  config.validate();
  if (height < 2 || width < 2) fail("multi-block masks need a patch grid of at least 2 x 2, got ", height, " x ", width);
  if (batch < 1) fail("multi-block masks need a batch of at least 1 image, got ", batch);
  if (config.min_keep >= height * width) {
    fail("jepa.min_keep = ", config.min_keep, " leaves no possible context block on a ", height, " x ", width, " patch grid");
  }
  const Size target = block_size(generator, height, width, config.target_scale, config.aspect);
  const Size context = block_size(generator, height, width, config.context_scale, {1.0, 1.0});
  // A block no bigger than min_keep could never be accepted (the reference would loop forever).
  if (target.h * target.w <= config.min_keep || context.h * context.w <= config.min_keep) {
    fail("on a ", height, " x ", width, " patch grid this batch's blocks are ", target.h, " x ", target.w, " (targets) and ",
         context.h, " x ", context.w, " (context), but every block must keep more than jepa.min_keep = ", config.min_keep,
         " patches; lower min_keep, raise the scales or use smaller patches");
  }
  std::vector<std::vector<std::vector<std::int64_t>>> targets, contexts;
  std::int64_t keep_target = height * width, keep_context = height * width;
  for (std::int64_t b = 0; b < batch; ++b) {
    std::vector<std::vector<std::int64_t>> image_targets;
    std::vector<Grid> complements;
    for (std::int64_t m = 0; m < config.num_targets; ++m) {
      // Targets only need more than min_keep patches too (the reference applies the same test to them).
      Block block = block_mask(generator, height, width, target, config.min_keep, nullptr);
      keep_target = std::min<std::int64_t>(keep_target, static_cast<std::int64_t>(block.kept.size()));
      image_targets.push_back(std::move(block.kept));
      complements.push_back(std::move(block.complement));
    }
    std::vector<std::vector<std::int64_t>> image_contexts;
    for (std::int64_t m = 0; m < config.num_context; ++m) {
      Block block = block_mask(generator, height, width, context, config.min_keep, config.allow_overlap ? nullptr : &complements);
      keep_context = std::min<std::int64_t>(keep_context, static_cast<std::int64_t>(block.kept.size()));
      image_contexts.push_back(std::move(block.kept));
    }
    targets.push_back(std::move(image_targets));
    contexts.push_back(std::move(image_contexts));
  }
  BlockMasks out;
  out.target_height = target.h, out.target_width = target.w;
  out.context_height = context.h, out.context_width = context.w;
  out.context = collate(contexts, keep_context);
  out.targets = collate(targets, keep_target);
  return out;
}

}  // namespace dew::objectives::jepa
