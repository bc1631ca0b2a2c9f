#pragma once
// adaLN's "norm, then modulate" on one row of D (nn/diffusion/modulated_norm.h runs it over the batch):
// y = (x - mean) * rstd * (1 + scale) + shift, and the backward adding into the image's dscale and dshift.
#include <cstdint>

namespace dew::nn::kernels {

void modulated_norm_forward_row(const float* x, const float* shift, const float* scale, float* y, std::int64_t D, float eps,
                                float* mean_out, float* rstd_out);
void modulated_norm_backward_row(const float* x, const float* g, const float* scale, float mean, float rstd, std::int64_t D,
                                 float* dx, float* dscale, float* dshift);

}  // namespace dew::nn::kernels
