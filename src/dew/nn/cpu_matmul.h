#pragma once
// Float32 matrix products on the CPU through oneDNN (built into libtorch) instead of MKL's sgemm.
//
// ATen sends every float32 CPU matmul to MKL. On AMD Zen MKL takes its generic AVX2 kernels
// (mkl_blas_def_sgemm_kernel_0_zen in a profile), while oneDNN's JIT kernels use the AVX-512 the CPU has:
// 10-25% more GFLOP/s at a decoder's shapes (bench/cpu_matmul_bench.cpp), and matmuls are 80% of a
// fine-tuning step. Same float32 arithmetic: only the order of the K-long sums differs, as it does between
// MKL's own kernels for different shapes or thread counts.
//
// Each function is exactly the ATen op named beside it wherever oneDNN does not apply: another device or
// dtype, a product too small to repay oneDNN's per-call set-up, a libtorch without oneDNN, or
// DEW_CPU_MATMUL=aten in the environment (to compare the two).
#include <ATen/ATen.h>

namespace dew::nn {

// x [..., in] W^T (+ b), W [out, in], b [out]: at::linear, differentiable in x, W and b (once). Forward and
// the input gradient (dY W) go through oneDNN; the weight gradient dY^T x through nn/weight_gradient.h.
at::Tensor cpu_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});

// residual + x W^T (+ b), residual [..., out] shaped as the product: a transformer's residual connection
// around its output projection. Where cpu_linear takes oneDNN (and the residual is a contiguous float32 CPU
// tensor), the addition is applied as the product's results are written: no separate pass reading two
// [tokens, out] blocks and writing a third, forward; backward the residual's gradient is the output's
// (the same tensor). Elsewhere residual + cpu_linear(x, weight, bias).
at::Tensor cpu_linear_plus(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& residual);

// gelu_tanh(x W^T + b) in one oneDNN call where no gradient is needed (the activation is applied as the
// product's results are written: no second pass over a [tokens, hidden] block); an undefined tensor where
// that does not apply (gradients wanted, another device or dtype, a product oneDNN does not take), and the
// caller composes the two. oneDNN's tanh-GELU agrees with dew's (nn/activations.h) to float rounding.
at::Tensor cpu_linear_gelu_tanh_no_grad(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// a [..., k] b^T for b [m, k] (any strides): at::linear(a, b), for hand-written forward and backward passes.
// Where autograd would record the product (grad mode on, an operand requiring grad) it is at::linear itself.
at::Tensor mm_transposed(const at::Tensor& a, const at::Tensor& b);

// Whether a [.., k] b^T (b [m, k]) takes the oneDNN path (for tests and benchmarks).
bool uses_onednn(const at::Tensor& a, const at::Tensor& b);

// a [n, k] b^T through oneDNN whatever its size, for benchmarks and tests that compare the two libraries;
// an undefined tensor where oneDNN is not available (see above).
at::Tensor onednn_mm_transposed(const at::Tensor& a, const at::Tensor& b);

}  // namespace dew::nn
