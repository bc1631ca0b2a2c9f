#include "dew/nn/weight_gradient.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "dew/nn/cpu_kernel.h"

namespace dew::nn {
namespace {

constexpr std::int64_t kTileRows = 8;        // rows of dW (outputs) one tile keeps in registers
constexpr std::int64_t kPanel = 2 * kLanes;  // columns of dW (inputs) one tile keeps: 8 x 2 = 16 accumulators
// Rows of dY and X per block: a block's columns of X (256 x 32 floats, 32 KiB) stay in L1 while every tile
// of the panel reads them, and its rows of dY (256 x 256 floats) in L2 while the panels go by.
constexpr std::int64_t kDepth = 256;
constexpr std::int64_t kOutBlock = 256;
constexpr std::int64_t kMaxOut = 8192;  // see weight_gradient_applies
constexpr std::int64_t kAhead = 16;     // rows the loads are prefetched ahead

// Only built for AVX-512: elsewhere MKL's own kernels are the better choice, so there is no other clone.
#define DEW_AVX512 __attribute__((target("arch=x86-64-v4")))

// C[r, 0:16V] (+)= sum over k < depth of A[k * lda + r] * B[k * ldb + 0:16V], for r < R: A is dY (its row k
// holds the R outputs side by side), B is X, C is dW. R x V accumulators stay in registers over the depth;
// each row of B loaded feeds R multiply-adds per vector. With Bias, D[r] (+)= sum over k of A[k * lda + r]
// too: the bias gradient from the loads the product makes anyway (the tiles of dW's first panel do it).
template <int R, int V, bool Bias>
DEW_AVX512 void tile(std::int64_t depth, const float* __restrict A, std::int64_t lda, const float* __restrict B, std::int64_t ldb,
                     float* __restrict C, std::int64_t ldc, bool accumulate, float* __restrict D) {
  Lanes acc[R][V];
  float sums[R];
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < V; ++v) acc[r][v] = accumulate ? DEW_LANES_LOAD(C + r * ldc + v * kLanes) : Lanes{};
    if (Bias) sums[r] = accumulate ? D[r] : 0.0f;
  }
  for (std::int64_t k = 0; k < depth; ++k, A += lda, B += ldb) {
    // In a training step X and dY arrive from memory, not cache: ask for the rows a few steps ahead.
    __builtin_prefetch(A + kAhead * lda);
    for (int v = 0; v < V; ++v) __builtin_prefetch(B + kAhead * ldb + v * kLanes);
    Lanes b[V];
    for (int v = 0; v < V; ++v) b[v] = DEW_LANES_LOAD(B + v * kLanes);
    for (int r = 0; r < R; ++r) {
      const float a = A[r];
      for (int v = 0; v < V; ++v) acc[r][v] += a * b[v];
      if (Bias) sums[r] += a;
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int v = 0; v < V; ++v) DEW_LANES_STORE(C + r * ldc + v * kLanes, acc[r][v]);
    if (Bias) D[r] = sums[r];
  }
}

using Tile = void (*)(std::int64_t, const float*, std::int64_t, const float*, std::int64_t, float*, std::int64_t, bool, float*);
// kTiles[Bias][V - 1][R - 1]: the full 8 x 32 tile, the narrower ones for the last rows and a 16-wide last
// panel, each with and without the bias gradient.
#define DEW_TILE_ROW(V, B) {tile<1, V, B>, tile<2, V, B>, tile<3, V, B>, tile<4, V, B>, tile<5, V, B>, tile<6, V, B>, tile<7, V, B>, tile<8, V, B>}
constexpr Tile kTiles[2][2][kTileRows] = {{DEW_TILE_ROW(1, false), DEW_TILE_ROW(2, false)}, {DEW_TILE_ROW(1, true), DEW_TILE_ROW(2, true)}};
#undef DEW_TILE_ROW

// dW's panels [panel_begin, panel_end) (32 columns each; the last may be 16): every block of depth, then
// every block of outputs, then the panels, then the tiles down the panel. `accumulate`: add to dW's values.
// With `db`, panel 0's tiles also sum dY's columns into it (written, or added to with `accumulate`).
void panels(const float* dy, std::int64_t ldy, const float* x, std::int64_t ldx, float* dw, std::int64_t K, std::int64_t out,
            std::int64_t in, std::int64_t panel_begin, std::int64_t panel_end, bool accumulate, float* db) {
  for (std::int64_t k0 = 0; k0 < K; k0 += kDepth) {
    const std::int64_t depth = std::min(kDepth, K - k0);
    for (std::int64_t m0 = 0; m0 < out; m0 += kOutBlock) {
      const std::int64_t m_end = std::min(out, m0 + kOutBlock);
      for (std::int64_t p = panel_begin; p < panel_end; ++p) {
        const std::int64_t j = p * kPanel, vectors = std::min(kPanel, in - j) / kLanes;
        for (std::int64_t m = m0; m < m_end; m += kTileRows) {
          const std::int64_t rows = std::min(kTileRows, m_end - m);
          const bool bias = db != nullptr && p == 0;
          kTiles[bias][vectors - 1][rows - 1](depth, dy + k0 * ldy + m, ldy, x + k0 * ldx + j, ldx, dw + m * in + j, in,
                                              accumulate || k0 > 0, bias ? db + m : nullptr);
        }
      }
    }
  }
}

#undef DEW_AVX512

bool cpu_has_avx512() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq");
  }();
  return has;
}

bool switched_off() {
  static const bool off = [] {
    const char* choice = std::getenv("DEW_CPU_MATMUL");
    return choice != nullptr && std::strcmp(choice, "aten") == 0;
  }();
  return off;
}

}  // namespace

bool weight_gradient_applies(const at::Tensor& dy, const at::Tensor& x) {
  if (!dy.defined() || !x.defined() || dy.dim() != 2 || x.dim() != 2 || dy.size(0) != x.size(0)) return false;
  if (!dy.device().is_cpu() || !x.device().is_cpu() || dy.layout() != at::kStrided || x.layout() != at::kStrided) return false;
  if (dy.scalar_type() != at::kFloat || x.scalar_type() != at::kFloat) return false;
  if (dy.stride(1) != 1 || x.stride(1) != 1 || x.size(1) % kLanes != 0 || x.size(1) < 1) return false;
  if (dy.size(1) < 1 || dy.size(1) > kMaxOut) return false;
  return cpu_has_avx512() && !switched_off();
}

namespace {
// dw (+)= dy^T x with the kernel, and db (+)= dY's column sums when given; dw contiguous [out, in], the shapes
// checked by weight_gradient_applies.
void run(float* dw, const at::Tensor& dy, const at::Tensor& x, bool accumulate, float* db) {
  const std::int64_t K = dy.size(0), out = dy.size(1), in = x.size(1);
  const float *dyp = dy.data_ptr<float>(), *xp = x.data_ptr<float>();
  const std::int64_t ldy = dy.stride(0), ldx = x.stride(0), count = (in + kPanel - 1) / kPanel;
  at::parallel_for(0, count, 1, [&](std::int64_t begin, std::int64_t end) {
    panels(dyp, ldy, xp, ldx, dw, K, out, in, begin, end, accumulate, db);
  });
}
}  // namespace

at::Tensor weight_gradient(const at::Tensor& dy, const at::Tensor& x, at::Tensor* bias_gradient) {
  if (!weight_gradient_applies(dy, x)) {
    if (bias_gradient != nullptr) *bias_gradient = dy.sum(0);
    return at::mm(dy.t(), x);
  }
  at::Tensor dw = at::empty({dy.size(1), x.size(1)}, x.options());
  if (bias_gradient != nullptr) *bias_gradient = at::empty({dy.size(1)}, x.options());
  if (dy.size(0) == 0) {
    if (bias_gradient != nullptr) bias_gradient->zero_();
    return dw.zero_();
  }
  run(dw.data_ptr<float>(), dy, x, false, bias_gradient != nullptr ? bias_gradient->data_ptr<float>() : nullptr);
  return dw;
}

void add_weight_gradient(at::Tensor& into, const at::Tensor& dy, const at::Tensor& x) {
  const bool fits = into.scalar_type() == at::kFloat && into.is_contiguous() && into.dim() == 2 && into.device().is_cpu() &&
                    dy.dim() == 2 && x.dim() == 2 && into.size(0) == dy.size(1) && into.size(1) == x.size(1);
  if (!fits || !weight_gradient_applies(dy, x)) {
    into.add_(at::mm(dy.t(), x));
    return;
  }
  if (dy.size(0) > 0) run(into.data_ptr<float>(), dy, x, true, nullptr);
}

}  // namespace dew::nn
