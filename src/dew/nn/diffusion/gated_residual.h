#pragma once
// adaLN-Zero's gated residual: x + gate * branch, with x and branch [B, N, D] and gate [B, D] shared by the
// N tokens of each image. DiT adds each block's attention and MLP branch this way.
//
// Float32 on the CPU runs a fused kernel, parallel over the batch: one pass forward, and one backward that
// reads the output's gradient and the branch once to write the branch's gradient (gradient * gate) and the
// gate's (summed over each image's tokens); x's gradient is the output's itself. at::addcmul's backward
// instead makes a [B, N, D] product, sums it over the tokens and makes a second product. Other dtypes and
// devices use at::addcmul. Not twice differentiable.
#include <ATen/ATen.h>

namespace dew::nn::diffusion {

at::Tensor gated_residual(const at::Tensor& x, const at::Tensor& gate, const at::Tensor& branch);

}  // namespace dew::nn::diffusion
