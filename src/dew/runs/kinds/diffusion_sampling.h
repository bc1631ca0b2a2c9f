#pragma once
// Drawing images from a diffusion run's model: what the preview grid, `dew sample` and `dew eval`'s
// sample-quality figures share. Deterministic for a seed: x_T and every ancestral draw come from one CPU
// generator seeded with it, in batch order.
#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "dew/inference/diffusion/sampler_config.h"
#include "dew/nn/diffusion/image_model.h"
#include "dew/objectives/diffusion/diffusion_objective.h"

namespace dew::runs {

struct ImageDrawRequest {
  std::vector<std::int64_t> labels;  // one per image, in [0, num_classes]; num_classes = unconditional
  std::uint64_t seed = 0;
  inference::diffusion::SamplerConfig sampler;
  std::int64_t batch = 100;          // images per solver run (memory); results do not depend on it
};

// Images float32 [N, C, H, W] in [-1, 1] (clamped), on the CPU. The model is used as it is (eval mode,
// whatever weights it holds, on its device).
at::Tensor draw_images(const std::shared_ptr<nn::diffusion::ImageModelImpl>& model,
                       const objectives::diffusion::DiffusionObjectiveConfig& diffusion, const ImageDrawRequest& request);

// Labels for a grid with a row per class: 0 x per_class, 1 x per_class, ... (num_classes rows).
std::vector<std::int64_t> labels_by_class(std::int64_t num_classes, std::int64_t per_class);

}  // namespace dew::runs
