#pragma once
// adaLN's "norm, then modulate" as one operation: LayerNorm over the last dimension without affine
// parameters, then x_hat * (1 + scale) + shift with shift and scale [B, D] shared by the N tokens of x
// [B, N, D]. DiT does it twice per block and once more before its output layer.
//
// Float32 on the CPU runs a fused kernel: one pass forward (per row: mean, variance, normalise, modulate) and
// one backward (dx, and dshift/dscale reduced over each image's tokens), parallel over the batch, instead of
// LibTorch's layer norm, addcmul and their backward's separate products and sums. Other dtypes and devices
// compose at::layer_norm and addcmul. Not twice differentiable.
#include <ATen/ATen.h>

namespace dew::nn::diffusion {

at::Tensor modulated_layer_norm(const at::Tensor& x, const at::Tensor& shift, const at::Tensor& scale, double eps);

}  // namespace dew::nn::diffusion
