#pragma once
// The activations dew's networks use, with fused CPU kernels for float32.
//
// LibTorch 2.11's CPU kernels for tanh-GELU and SiLU take 4-5x the time of a memory-bound elementwise op
// (1.3 ms for 1.6 M floats on 2 AVX-512 cores, where tanh alone takes 0.28 ms), and a DiT spends 12% of a
// training step in them. These compute each as x * sigmoid(z), with one exp per element, in one pass forward
// and one backward (recomputing the sigmoid from the saved input instead of saving it), vectorised for
// AVX-512, AVX2 or SSE2 as nn/kernels/cpu_isa.h picks for the CPU.
//
// Values: within ~2 ulp of the exact function (exp's 7th-order polynomial on [-ln2/2, ln2/2] is exact to
// ~5e-9 relative, then a few roundings), not bit-identical to at::gelu / at::silu. Other devices and dtypes
// go through at::gelu / at::silu. Not twice differentiable.
#include <ATen/ATen.h>

namespace dew::nn {

at::Tensor gelu_tanh(const at::Tensor& x);  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) = at::gelu(x, "tanh")
at::Tensor silu(const at::Tensor& x);       // x sigmoid(x) = at::silu(x)

// Gated units of the gated MLPs, fused as one op for float32 on the CPU (one pass forward, one backward,
// saving the two inputs only); otherwise the product of the activation above and `up`. gate, up: same shape.
at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up);  // silu(gate) * up
at::Tensor geglu(const at::Tensor& gate, const at::Tensor& up);   // gelu_tanh(gate) * up

}  // namespace dew::nn
