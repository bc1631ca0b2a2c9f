#include "dew/nn/kernels/weight_gradient.h"

#include <algorithm>

#include "dew/nn/kernels/cpu_isa.h"
#include "dew/nn/kernels/lanes.h"

namespace dew::nn::kernels {

namespace {

constexpr std::int64_t kTileRows = 8;  // rows of dW (outputs) one tile keeps in registers
static_assert(kWeightGradientPanel == 2 * kLanes, "a tile keeps two vectors of a row");
// Rows of dY and X per block: a block's columns of X (256 x 32 floats, 32 KiB) stay in L1 while every tile
// of the panel reads them, and its rows of dY (256 x 256 floats) in L2 while the panels go by.
constexpr std::int64_t kDepth = 256;
constexpr std::int64_t kOutBlock = 256;
constexpr std::int64_t kAhead = 16;  // rows the loads are prefetched ahead

// C[r, 0:16V] (+)= sum over k < depth of A[k * lda + r] * B[k * ldb + 0:16V], for r < R: A is dY (its row k
// holds the R outputs side by side), B is X, C is dW. R x V accumulators stay in registers over the depth;
// each row of B loaded feeds R multiply-adds per vector. With Bias, D[r] (+)= sum over k of A[k * lda + r]
// too: the bias gradient from the loads the product makes anyway (the tiles of dW's first panel do it).
template <int R, int V, bool Bias>
DEW_TARGET_AVX512 void tile(std::int64_t depth, const float* __restrict A, std::int64_t lda, const float* __restrict B, std::int64_t ldb,
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

}  // namespace

void weight_gradient_panels(const float* dy, std::int64_t ldy, const float* x, std::int64_t ldx, float* dw, std::int64_t K,
                            std::int64_t out, std::int64_t in, std::int64_t panel_begin, std::int64_t panel_end, bool accumulate,
                            float* db) {
  for (std::int64_t k0 = 0; k0 < K; k0 += kDepth) {
    const std::int64_t depth = std::min(kDepth, K - k0);
    for (std::int64_t m0 = 0; m0 < out; m0 += kOutBlock) {
      const std::int64_t m_end = std::min(out, m0 + kOutBlock);
      for (std::int64_t p = panel_begin; p < panel_end; ++p) {
        const std::int64_t j = p * kWeightGradientPanel, vectors = std::min(kWeightGradientPanel, in - j) / kLanes;
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

}  // namespace dew::nn::kernels
