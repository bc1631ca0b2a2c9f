#pragma once
// Rotary position embeddings in the rotate-half layout Hugging Face Llama uses. The angles are computed
// in fp32 from integer positions (so packed rows, whose positions restart per document, rotate right),
// then cast to the compute dtype as transformers does.
#include <ATen/ATen.h>

namespace dew::nn {

struct RotaryAngles {
  at::Tensor cos, sin;  // [B, 1, S, head_dim], compute dtype
};

RotaryAngles rotary_angles(const at::Tensor& positions, std::int64_t head_dim, double theta, c10::ScalarType dtype);

// x: [B, heads, S, head_dim]
at::Tensor apply_rotary(const at::Tensor& x, const RotaryAngles& angles);

}  // namespace dew::nn
