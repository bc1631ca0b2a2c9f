#pragma once
// RMSNorm over the last dimension: y = x / sqrt(mean(x^2) + eps) * (weight_offset + weight), computed in fp32
// as transformers computes it.
//
// Float32 inputs on the CPU (the weight in any floating dtype, cast to fp32 as the reference casts it) run a
// fused kernel: forward is one pass per row (sum of squares, then
// scale) saving only the per-row 1/rms; backward is one pass per row recomputing the normalised row, plus a
// weight gradient summed over fixed blocks of rows (so it does not depend on the thread count). The ATen
// composition it replaces (pow, mean, add, rsqrt, two muls, and their autograd backwards) makes about ten
// passes over the activations and saves three copies of them. Other devices and dtypes take that
// composition (see rms_norm_reference).
//
// Values: within a few float32 ulp of the reference (the sum of squares is accumulated in 16 lanes, then
// the lanes added, instead of ATen's own order). Not twice differentiable.
#include <ATen/ATen.h>

namespace dew::nn {

// x: [..., D]; weight: [D]. The result has x's dtype: with weight_offset == 0 the weight is cast to x's dtype
// and multiplies the normalised row cast to x's dtype (Llama); otherwise the fp32 scaling happens before
// the cast (Gemma's (1 + weight)).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, double weight_offset = 0.0);

// The ATen composition, on any device and dtype (what the fused kernel is checked against).
at::Tensor rms_norm_reference(const at::Tensor& x, const at::Tensor& weight, double eps, double weight_offset = 0.0);

}  // namespace dew::nn
