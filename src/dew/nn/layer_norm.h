#pragma once
// LayerNorm over the last dimension with a learned scale and shift: (x - mean) / sqrt(var + eps) * weight +
// bias, the ViTs' norm (I-JEPA's encoders and predictor).
//
// Float32 contiguous CPU tensors run a fused kernel: one pass per row forward (mean, centred variance,
// normalise, scale and shift) and one backward (dx per row; dweight and dbias summed per thread, then over
// the threads), instead of LibTorch's layer norm, whose CPU backward takes separate passes for the two
// parameter gradients. Anything else goes to at::layer_norm. Not twice differentiable.
#include <ATen/ATen.h>

namespace dew::nn {

at::Tensor affine_layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps);

}  // namespace dew::nn
