#pragma once
// Rotary position embeddings in the rotate-half layout Hugging Face Llama uses. The angles are computed
// in fp32 from integer positions (so packed rows, whose positions restart per document, rotate right),
// then cast to the compute dtype as transformers does.
#include <ATen/ATen.h>

#include "dew/nn/causal_transformer_config.h"

namespace dew::nn {

struct RotaryAngles {
  at::Tensor cos, sin;  // [B, 1, S, head_dim], compute dtype
};

// The fp32 inverse frequencies [head_dim / 2], exactly as transformers builds them for the scaling type.
at::Tensor rotary_inv_freq(std::int64_t head_dim, double theta, const RopeScaling& scaling, c10::Device device);

RotaryAngles rotary_angles(const at::Tensor& positions, const at::Tensor& inv_freq, c10::ScalarType dtype);
// Unscaled frequencies with base theta.
RotaryAngles rotary_angles(const at::Tensor& positions, std::int64_t head_dim, double theta, c10::ScalarType dtype);

// x: [B, heads, S, head_dim]
at::Tensor apply_rotary(const at::Tensor& x, const RotaryAngles& angles);

}  // namespace dew::nn
