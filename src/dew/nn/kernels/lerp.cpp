#include "dew/nn/kernels/lerp.h"

#include <cmath>

#include "dew/nn/kernels/cpu_isa.h"

namespace dew::nn::kernels {

namespace {

// ATen's lerp: a + w (b - a) for |w| < 0.5, else b - (b - a)(1 - w), which is exact at w = 1.
DEW_KERNEL_BODY void lerp_range_loop(float* __restrict a, const float* __restrict b, std::int64_t n, float w) {
  if (std::abs(w) < 0.5f) {
    for (std::int64_t i = 0; i < n; ++i) a[i] = a[i] + w * (b[i] - a[i]);
  } else {
    const float rest = 1.0f - w;
    for (std::int64_t i = 0; i < n; ++i) a[i] = b[i] - (b[i] - a[i]) * rest;
  }
}

}  // namespace

void lerp(float* a, const float* b, std::int64_t n, float w) { on_cpu_isa<lerp_range_loop>(a, b, n, w); }

}  // namespace dew::nn::kernels
