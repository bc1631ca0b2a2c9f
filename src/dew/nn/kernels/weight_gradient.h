#pragma once
// The weight gradient's tiles, dW (+)= dY^T X, for AVX-512 only: where the CPU lacks it (or force_cpu_isa
// asks for less), MKL's own kernels are the better choice, so there is no other copy and
// nn/weight_gradient.h sends the product to at::mm.
#include <cstdint>

namespace dew::nn::kernels {

// Columns of dW (inputs) one panel covers: a tile of 8 rows keeps 8 x 2 vectors of accumulators.
constexpr std::int64_t kWeightGradientPanel = 32;

// dW's panels [panel_begin, panel_end) (kWeightGradientPanel columns each; the last may be 16): every
// block of depth, then every block of outputs, then the panels, then the tiles down the panel. dy [K, out]
// and x [K, in] have rows ldy and ldx apart, dw is [out, in] contiguous, `in` a multiple of 16.
// `accumulate`: add to dW's values. With `db`, panel 0's tiles also sum dY's columns into it (written, or
// added to with `accumulate`). Only for cpu_isa() == CpuIsa::avx512.
void weight_gradient_panels(const float* dy, std::int64_t ldy, const float* x, std::int64_t ldx, float* dw, std::int64_t K,
                            std::int64_t out, std::int64_t in, std::int64_t panel_begin, std::int64_t panel_end, bool accumulate,
                            float* db);

}  // namespace dew::nn::kernels
