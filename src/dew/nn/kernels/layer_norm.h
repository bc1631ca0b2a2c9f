#pragma once
// LayerNorm's row loops (nn/layer_norm.h says what they compute): normalise, scale and shift rows
// [begin, end) keeping their mean and rstd; the backward adds into one thread's dw and db.
#include <cstdint>

namespace dew::nn::kernels {

void layer_norm_forward_rows(const float* x, const float* w, const float* b, float* y, std::int64_t begin, std::int64_t end,
                             std::int64_t D, float eps, float* mean_out, float* rstd_out);
void layer_norm_backward_rows(const float* x, const float* g, const float* w, const float* mean, const float* rstd,
                              std::int64_t begin, std::int64_t end, std::int64_t D, float* dx, float* dw, float* db);

}  // namespace dew::nn::kernels
