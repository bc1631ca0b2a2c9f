#include "dew/nn/kernels/adam.h"

#include "dew/nn/kernels/cpu_isa.h"

namespace dew::nn::kernels {

namespace {

// The foreach path's ops, element by element: lerp_(m, g, 1 - beta1) (ATen's formula for a weight below
// 0.5, else from the other end), v = v beta2 + (1 - beta2) g g, p += -step_size m / (sqrt(v) / bc2 + eps).
DEW_KERNEL_BODY void adam_loop(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
                               std::int64_t n, const AdamConstants& c) {
  // Locals, so the vectoriser sees loop invariants rather than loads through a pointer.
  const float grad_scale = c.grad_scale, l2 = c.l2, decay_multiplier = c.decay_multiplier, w = c.one_minus_beta1;
  const float beta2 = c.beta2, one_minus_beta2 = c.one_minus_beta2, bias_correction2_sqrt = c.bias_correction2_sqrt;
  const float eps = c.eps, neg_step_size = c.neg_step_size, beta1 = 1.0f - w;
  // Two copies of one loop, for ATen's two lerp formulas (a macro, not a helper, so nothing is left to the
  // inliner).
#define DEW_ADAM_LOOP(NEW_M)                                                                    \
  for (std::int64_t i = 0; i < n; ++i) {                                                        \
    const float grad = g[i] * grad_scale + l2 * p[i];                                           \
    const float mi = (NEW_M);                                                                   \
    const float vi = v[i] * beta2 + one_minus_beta2 * grad * grad;                              \
    const float denom = __builtin_sqrtf(vi) / bias_correction2_sqrt + eps;                      \
    p[i] = p[i] * decay_multiplier + neg_step_size * (mi / denom);                              \
    m[i] = mi;                                                                                  \
    v[i] = vi;                                                                                  \
  }
  if (w < 0.5f) {
    DEW_ADAM_LOOP(m[i] + w * (grad - m[i]))
  } else {
    DEW_ADAM_LOOP(grad - (grad - m[i]) * beta1)
  }
#undef DEW_ADAM_LOOP
}

}  // namespace

void adam_update(float* p, const float* g, float* m, float* v, std::int64_t n, const AdamConstants& c) {
  on_cpu_isa<adam_loop>(p, g, m, v, n, c);
}

}  // namespace dew::nn::kernels
