#pragma once
// The rotate-half rotation of one row of head_dim = 2h by its cos and sin rows (nn/rotary.h's
// apply_rotary runs it over [B, heads, S, head_dim]); with `transpose` its transpose, the backward.
#include <cstdint>

namespace dew::nn::kernels {

void rotate_row(const float* x, const float* c, const float* s, float* y, std::int64_t h, bool transpose);

}  // namespace dew::nn::kernels
