#pragma once
// RMSNorm's row loops (nn/rms_norm.h says what they compute): y = (x * rstd) * scale per row, and the
// backward recomputing the normalised row.
#include <cstdint>

namespace dew::nn::kernels {

void rms_norm_forward_rows(const float* x, const float* scale, float eps, float* y, float* rstd, std::int64_t rows,
                           std::int64_t d);
void rms_norm_backward_rows(const float* x, const float* g, const float* scale, const float* rstd, float* dx, float* dscale,
                            std::int64_t rows, std::int64_t d);

}  // namespace dew::nn::kernels
