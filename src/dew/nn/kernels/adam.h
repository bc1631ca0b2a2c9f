#pragma once
// The fused Adam(W) update of float32 parameters (training/optimizer.cpp runs it over every parameter in
// one parallel pass): the arithmetic of torch.optim's foreach path, element by element.
#include <cstdint>

namespace dew::nn::kernels {

// One Adam(W) update's constants for one parameter, in float as ATen's float kernels use its scalars.
struct AdamConstants {
  float grad_scale;        // the gradient is grad * grad_scale
  float l2;                // Adam's coupled decay: g += l2 * p (0 for AdamW)
  float decay_multiplier;  // AdamW's decoupled decay: p *= 1 - lr * wd (1 for Adam)
  float one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps, neg_step_size;
};

// p, g, m, v: n floats each, the parameter, its gradient and Adam's two moments, updated in place (g is
// only read).
void adam_update(float* p, const float* g, float* m, float* v, std::int64_t n, const AdamConstants& c);

}  // namespace dew::nn::kernels
