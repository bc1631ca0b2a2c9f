#pragma once
// adaLN-Zero's gated residual over one image's N rows of D (nn/diffusion/gated_residual.h runs it over
// the batch): out = x + gate * y, and the backward dy = g * gate, dgate = sum over the rows of g * y.
#include <cstdint>

namespace dew::nn::kernels {

void gated_residual_forward_image(const float* x, const float* gate, const float* y, float* out, std::int64_t N, std::int64_t D);
void gated_residual_backward_image(const float* g, const float* gate, const float* y, float* dy, float* dgate, std::int64_t N,
                                   std::int64_t D);

}  // namespace dew::nn::kernels
