#include "dew/nn/kernels/rms_norm.h"

#include <cmath>

#include "dew/nn/kernels/cpu_isa.h"

namespace dew::nn::kernels {

namespace {

// Sum of a[i] * b[i] in 16 independent lanes (which GCC turns into one or two vector accumulators), then
// the lanes and the tail.
DEW_KERNEL_BODY float dot_loop(const float* __restrict a, const float* __restrict b, std::int64_t d) {
  float lanes[16] = {};
  std::int64_t i = 0;
  for (; i + 16 <= d; i += 16)
    for (int j = 0; j < 16; ++j) lanes[j] += a[i + j] * b[i + j];
  float sum = 0.0f;
  for (int j = 0; j < 16; ++j) sum += lanes[j];
  for (; i < d; ++i) sum += a[i] * b[i];
  return sum;
}

// y = (x * rstd) * scale for `rows` rows of d; rstd[r] = 1 / sqrt(mean(x_r^2) + eps).
DEW_KERNEL_BODY void forward_rows_loop(const float* __restrict x, const float* __restrict scale, float eps, float* __restrict y,
                                       float* __restrict rstd, std::int64_t rows, std::int64_t d) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    const float rs = 1.0f / std::sqrt(dot_loop(xr, xr, d) / static_cast<float>(d) + eps);
    rstd[r] = rs;
    for (std::int64_t i = 0; i < d; ++i) yr[i] = (xr[i] * rs) * scale[i];
  }
}

// With n = x * rstd (the normalised row) and y = n * scale:
//   dscale += g * n (into dscale when it is not null)
//   dx = rstd * (g * scale - n * mean(g * scale * n))
DEW_KERNEL_BODY void backward_rows_loop(const float* __restrict x, const float* __restrict g, const float* __restrict scale,
                                        const float* __restrict rstd, float* __restrict dx, float* __restrict dscale,
                                        std::int64_t rows, std::int64_t d) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    const float* gr = g + r * d;
    float* dxr = dx + r * d;
    const float rs = rstd[r];
    float lanes[16] = {};
    std::int64_t i = 0;
    for (; i + 16 <= d; i += 16)
      for (int j = 0; j < 16; ++j) lanes[j] += gr[i + j] * scale[i + j] * xr[i + j];
    float sum = 0.0f;
    for (int j = 0; j < 16; ++j) sum += lanes[j];
    for (; i < d; ++i) sum += gr[i] * scale[i] * xr[i];
    const float mean_gsn = sum * rs / static_cast<float>(d);  // mean(g * scale * n)
    for (std::int64_t k = 0; k < d; ++k) dxr[k] = rs * (gr[k] * scale[k] - xr[k] * rs * mean_gsn);
    if (dscale != nullptr)
      for (std::int64_t k = 0; k < d; ++k) dscale[k] += gr[k] * (xr[k] * rs);
  }
}

}  // namespace

void rms_norm_forward_rows(const float* x, const float* scale, float eps, float* y, float* rstd, std::int64_t rows,
                           std::int64_t d) {
  on_cpu_isa<forward_rows_loop>(x, scale, eps, y, rstd, rows, d);
}
void rms_norm_backward_rows(const float* x, const float* g, const float* scale, const float* rstd, float* dx, float* dscale,
                            std::int64_t rows, std::int64_t d) {
  on_cpu_isa<backward_rows_loop>(x, g, scale, rstd, dx, dscale, rows, d);
}

}  // namespace dew::nn::kernels
