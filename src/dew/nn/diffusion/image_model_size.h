#pragma once
// How big an image model is and how much arithmetic one image costs, from the config alone (nothing is
// allocated): for memory estimates, run summaries and training MFU.
#include <cstdint>

#include "dew/nn/diffusion/image_model_config.h"

namespace dew::nn::diffusion {

// The number of elements of make_image_model(config)->parameters(), computed from the config (validated).
// DiT's fixed sin-cos positions are a buffer, not a parameter; learned ones count.
std::int64_t parameter_count(const ImageModelConfig& config);

// Forward FLOPs for one image: 2 * multiply-adds of every matrix product, convolution and attention
// (scores and weighted sum, 4 * tokens^2 * width per attention), which is what torch.utils.flop_counter
// counts; norms, activations, resampling and embedding lookups (a few percent) are left out, as MFU
// conventions do. A training step costs about 3x this per image (forward + backward).
double image_model_flops(const ImageModelConfig& config);

}  // namespace dew::nn::diffusion
