#pragma once
// The weight gradient of a linear layer, dW = dY^T X, on CPUs with AVX-512.
//
// ATen sends it to MKL, which on AMD Zen runs its generic AVX2 kernels: 150-170 GFLOP/s at DiT's and the
// demo decoder's shapes on two Zen 4 cores, where oneDNN's forward products reach ~220 (cpu_matmul_bench). oneDNN
// is slower still for this product (0.55-1.0x MKL: it wants dY transposed). The weight gradients are a third
// of a training step's products, so dew computes them itself: dW's rows come from dY's columns, which lie
// side by side in each row of dY, so a tile of dW is an outer-product sum that reads dY and X in place.
#include <ATen/ATen.h>

namespace dew::nn {

// Whether weight_gradient computes dy^T x itself: float32 CPU matrices dy [K, out] and x [K, in] with
// unit-stride rows, in a multiple of 16, out at most 8192 (dY's rows further apart than that cost a page per
// row read: an LM head's vocabulary, where MKL is faster), a CPU with AVX-512, and DEW_CPU_MATMUL not "aten"
// (the same switch that turns the oneDNN products off, to compare against MKL).
bool weight_gradient_applies(const at::Tensor& dy, const at::Tensor& x);

// dy^T x, [out, in]: at::mm(dy.t(), x) where weight_gradient_applies is false. Same float32 arithmetic; the
// K-long sums are taken in blocks of 256 rows, each block's in order. With `bias_gradient`, it is set to dy's
// column sums [out] (a Linear's bias gradient), taken by the kernel from the loads the product makes anyway
// (dy.sum(0) where the kernel does not apply).
at::Tensor weight_gradient(const at::Tensor& dy, const at::Tensor& x, at::Tensor* bias_gradient = nullptr);

// into += dy^T x for a contiguous float32 `into` [out, in] (a gradient summed over chunks of rows): added as
// it is computed, no product tensor in between; into.add_(at::mm(dy.t(), x)) where the kernel does not apply.
void add_weight_gradient(at::Tensor& into, const at::Tensor& dy, const at::Tensor& x);

}  // namespace dew::nn
