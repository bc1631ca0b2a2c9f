#include "dew/nn/kernels/rotary.h"

#include "dew/nn/kernels/cpu_isa.h"

namespace dew::nn::kernels {

namespace {

// One row of head_dim = 2h. Forward rotation:           y1 = x1 c1 - x2 s1,  y2 = x2 c2 + x1 s2;
// with `transpose` its transpose (the backward):          y1 = x1 c1 + x2 s2,  y2 = x2 c2 - x1 s1.
DEW_KERNEL_BODY void rotate_row_loop(const float* __restrict x, const float* __restrict c, const float* __restrict s,
                                     float* __restrict y, std::int64_t h, bool transpose) {
  if (!transpose) {
    for (std::int64_t i = 0; i < h; ++i) y[i] = x[i] * c[i] - x[i + h] * s[i];
    for (std::int64_t i = 0; i < h; ++i) y[i + h] = x[i + h] * c[i + h] + x[i] * s[i + h];
  } else {
    for (std::int64_t i = 0; i < h; ++i) y[i] = x[i] * c[i] + x[i + h] * s[i + h];
    for (std::int64_t i = 0; i < h; ++i) y[i + h] = x[i + h] * c[i + h] - x[i] * s[i];
  }
}

}  // namespace

void rotate_row(const float* x, const float* c, const float* s, float* y, std::int64_t h, bool transpose) {
  on_cpu_isa<rotate_row_loop>(x, c, s, y, h, transpose);
}

}  // namespace dew::nn::kernels
