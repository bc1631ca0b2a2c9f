#include "dew/nn/kernels/short_attention.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "dew/nn/kernels/cpu_isa.h"
#include "dew/nn/kernels/fast_exp.h"
#include "dew/nn/kernels/lanes.h"

namespace dew::nn::kernels {

namespace {

// C[m, 0:n] (+)= sum_k A[m, k] B[k, 0:n] for m < M, n a multiple of kLanes. A's element (m, k) is at
// A[m * am + k * ak], so a transposed A costs nothing (its four scalars a step are then adjacent); B and C
// have rows ldb and ldc apart. Four rows by two vectors of columns at a time: eight accumulators stay in
// registers over k and each loaded row of B feeds eight multiply-adds.
DEW_KERNEL_BODY void small_gemm_loop(std::int64_t M, std::int64_t n_all, std::int64_t K_all, const float* __restrict A,
                                     std::int64_t am, std::int64_t ak, const float* __restrict B, std::int64_t ldb,
                                     float* __restrict C, std::int64_t ldc, bool accumulate, Band band) {
  std::int64_t m = 0;
  for (; m + 4 <= M; m += 4) {
    float *c0 = C + m * ldc, *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc;
    const std::int64_t last = m + 4;  // one past the block's last row
    const std::int64_t n = band == Band::kColumnsToRow ? std::min(n_all, (last + kLanes - 1) / kLanes * kLanes) : n_all;
    const std::int64_t k_begin = band == Band::kDepthFromRow ? m : 0;
    const std::int64_t K = band == Band::kDepthToRow ? std::min(K_all, last) : K_all;
    for (std::int64_t j = n; j < n_all; ++j) c0[j] = c1[j] = c2[j] = c3[j] = 0.0f;
    std::int64_t j = 0;
    for (; j + 2 * kLanes <= n; j += 2 * kLanes) {
      Lanes x0 = {}, y0 = {}, x1 = {}, y1 = {}, x2 = {}, y2 = {}, x3 = {}, y3 = {};
      if (accumulate) {
        x0 = DEW_LANES_LOAD(c0 + j), y0 = DEW_LANES_LOAD(c0 + j + kLanes), x1 = DEW_LANES_LOAD(c1 + j), y1 = DEW_LANES_LOAD(c1 + j + kLanes);
        x2 = DEW_LANES_LOAD(c2 + j), y2 = DEW_LANES_LOAD(c2 + j + kLanes), x3 = DEW_LANES_LOAD(c3 + j), y3 = DEW_LANES_LOAD(c3 + j + kLanes);
      }
      const float* b = B + k_begin * ldb + j;
      const float* a = A + m * am + k_begin * ak;
      for (std::int64_t k = k_begin; k < K; ++k, b += ldb, a += ak) {
        const Lanes u = DEW_LANES_LOAD(b), w = DEW_LANES_LOAD(b + kLanes);
        const float s0 = a[0], s1 = a[am], s2 = a[2 * am], s3 = a[3 * am];
        x0 += s0 * u, y0 += s0 * w, x1 += s1 * u, y1 += s1 * w;
        x2 += s2 * u, y2 += s2 * w, x3 += s3 * u, y3 += s3 * w;
      }
      DEW_LANES_STORE(c0 + j, x0), DEW_LANES_STORE(c0 + j + kLanes, y0), DEW_LANES_STORE(c1 + j, x1), DEW_LANES_STORE(c1 + j + kLanes, y1);
      DEW_LANES_STORE(c2 + j, x2), DEW_LANES_STORE(c2 + j + kLanes, y2), DEW_LANES_STORE(c3 + j, x3), DEW_LANES_STORE(c3 + j + kLanes, y3);
    }
    for (; j < n; j += kLanes) {
      Lanes x0 = {}, x1 = {}, x2 = {}, x3 = {};
      if (accumulate) x0 = DEW_LANES_LOAD(c0 + j), x1 = DEW_LANES_LOAD(c1 + j), x2 = DEW_LANES_LOAD(c2 + j), x3 = DEW_LANES_LOAD(c3 + j);
      const float* b = B + k_begin * ldb + j;
      const float* a = A + m * am + k_begin * ak;
      for (std::int64_t k = k_begin; k < K; ++k, b += ldb, a += ak) {
        const Lanes u = DEW_LANES_LOAD(b);
        x0 += a[0] * u, x1 += a[am] * u, x2 += a[2 * am] * u, x3 += a[3 * am] * u;
      }
      DEW_LANES_STORE(c0 + j, x0), DEW_LANES_STORE(c1 + j, x1), DEW_LANES_STORE(c2 + j, x2), DEW_LANES_STORE(c3 + j, x3);
    }
  }
  for (; m < M; ++m) {
    float* c = C + m * ldc;
    const std::int64_t n = band == Band::kColumnsToRow ? std::min(n_all, (m + kLanes) / kLanes * kLanes) : n_all;
    const std::int64_t k_begin = band == Band::kDepthFromRow ? m : 0;
    const std::int64_t K = band == Band::kDepthToRow ? std::min(K_all, m + 1) : K_all;
    for (std::int64_t j = n; j < n_all; ++j) c[j] = 0.0f;
    for (std::int64_t j = 0; j < n; j += kLanes) {
      Lanes x = accumulate ? DEW_LANES_LOAD(c + j) : Lanes{};
      const float* b = B + k_begin * ldb + j;
      const float* a = A + m * am + k_begin * ak;
      for (std::int64_t k = k_begin; k < K; ++k, b += ldb, a += ak) x += a[0] * DEW_LANES_LOAD(b);
      DEW_LANES_STORE(c + j, x);
    }
  }
}

// Rows of hd floats from `rows` pointers `stride` apart into rows of hdp (times `factor`), the padding 0.
DEW_KERNEL_BODY void copy_rows_padded_loop(const float* __restrict from, std::int64_t stride, std::int64_t rows, std::int64_t hd,
                                           std::int64_t hdp, float factor, float* __restrict to) {
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* src = from + i * stride;
    float* dst = to + i * hdp;
    for (std::int64_t c = 0; c < hd; ++c) dst[c] = src[c] * factor;
    for (std::int64_t c = hd; c < hdp; ++c) dst[c] = 0.0f;
  }
}

// Rows of hdp floats back into rows of hd `stride` apart, times `factor`.
DEW_KERNEL_BODY void copy_rows_unpadded_loop(const float* __restrict from, std::int64_t rows, std::int64_t hd, std::int64_t hdp,
                                             float factor, float* __restrict to, std::int64_t stride) {
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* src = from + i * hdp;
    float* dst = to + i * stride;
    for (std::int64_t c = 0; c < hd; ++c) dst[c] = src[c] * factor;
  }
}

// Row i of the causal N x Np products q.k becomes softmax(scale q.k) over its first `i + 1` entries;
// the rest 0. Each pass runs over whole vectors with no scalar tail: the columns past the row's last valid
// one, up to the next multiple of 16, are set to -inf first, so they neither win the max nor count in the
// sum, and are zeroed at the end. The max and the sum keep 16 partial results (GCC will not reorder a
// float reduction by itself, and a one-lane chain of dependent adds runs at a fraction of the speed).
DEW_KERNEL_BODY void softmax_rows_loop(float* __restrict S, std::int64_t N, std::int64_t Np, float scale) {
  constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();
  for (std::int64_t i = 0; i < N; ++i) {
    float* s = S + i * Np;
    const std::int64_t valid = i + 1;
    const std::int64_t whole = (valid + kLanes - 1) / kLanes * kLanes;  // <= Np
    for (std::int64_t j = valid; j < whole; ++j) s[j] = kMinusInfinity;
    Lanes tops = DEW_LANES_LOAD(s);
    for (std::int64_t j = kLanes; j < whole; j += kLanes) {
      const Lanes x = DEW_LANES_LOAD(s + j);
      tops = x > tops ? x : tops;
    }
    float top = tops[0];
    for (int l = 1; l < kLanes; ++l) top = tops[l] > top ? tops[l] : top;
    for (std::int64_t j = 0; j < whole; ++j) {
      // scale > 0: the row's largest scaled entry is scale * top. Below e^-87 (fast_exp's clamp) the
      // weight is 0 outright: e^-87 times 1/sum would be a subnormal, and each arithmetic op on one costs
      // ~100 cycles (the -inf columns would hit it every row).
      const float x = (s[j] - top) * scale;
      s[j] = x > -87.0f ? fast_exp(x) : 0.0f;
    }
    Lanes sums = {};
    for (std::int64_t j = 0; j < whole; j += kLanes) sums += DEW_LANES_LOAD(s + j);
    float sum = 0.0f;
    for (int l = 0; l < kLanes; ++l) sum += sums[l];
    const float inverse = 1.0f / sum;
    for (std::int64_t j = 0; j < whole; ++j) s[j] *= inverse;
    for (std::int64_t j = valid; j < Np; ++j) s[j] = 0.0f;
  }
}

// dS = scale P (dP - rowsum(P dP)), in place of dP: the softmax's backward, times the scores' scale so
// that dQ = dS K and dK = dS^T Q (P is 0 where masked or padded). The row sum in 16 partial sums.
DEW_KERNEL_BODY void softmax_backward_rows_loop(const float* __restrict P, float* __restrict dP, std::int64_t N, std::int64_t Np,
                                                float scale) {
  for (std::int64_t i = 0; i < N; ++i) {
    const float* p = P + i * Np;
    float* d = dP + i * Np;
    Lanes dots = {};
    for (std::int64_t j = 0; j < Np; j += kLanes) dots += DEW_LANES_LOAD(p + j) * DEW_LANES_LOAD(d + j);
    float dot = 0.0f;
    for (int l = 0; l < kLanes; ++l) dot += dots[l];
    for (std::int64_t j = 0; j < Np; ++j) d[j] = scale * (p[j] * (d[j] - dot));
  }
}

// The key-major softmax, for attention without a mask: S holds scale-free scores k.q as [N keys, Np queries]
// (S^T), so one vector carries 16 queries' scores for one key and the softmax over the keys runs down the
// columns. Its max and sum are element-wise over rows: no horizontal reduction and no per-row tail, which
// in the row-major form cost more than the products for 8-49 tokens (a 17-token row is two vectors). The
// padded query columns (their q is 0) come out uniform and are never read.
DEW_KERNEL_BODY void softmax_columns_loop(float* __restrict S, std::int64_t N, std::int64_t Np, float scale) {
  float top[kMaxTokens], sum[kMaxTokens];
  for (std::int64_t j = 0; j < Np; ++j) top[j] = S[j], sum[j] = 0.0f;
  for (std::int64_t r = 1; r < N; ++r) {
    const float* s = S + r * Np;
    for (std::int64_t j = 0; j < Np; ++j) top[j] = s[j] > top[j] ? s[j] : top[j];
  }
  for (std::int64_t r = 0; r < N; ++r) {
    float* s = S + r * Np;
    for (std::int64_t j = 0; j < Np; ++j) {
      const float x = (s[j] - top[j]) * scale;  // scale > 0, as in softmax_rows; below e^-87 a weight is 0
      const float e = x > -87.0f ? fast_exp(x) : 0.0f;
      s[j] = e;
      sum[j] += e;
    }
  }
  for (std::int64_t j = 0; j < Np; ++j) sum[j] = 1.0f / sum[j];
  for (std::int64_t r = 0; r < N; ++r) {
    float* s = S + r * Np;
    for (std::int64_t j = 0; j < Np; ++j) s[j] *= sum[j];
  }
}

// softmax_backward_rows for key-major P and dP ([N keys, Np queries]): the sums over keys run down the columns.
DEW_KERNEL_BODY void softmax_backward_columns_loop(const float* __restrict P, float* __restrict dP, std::int64_t N,
                                                   std::int64_t Np, float scale) {
  float dot[kMaxTokens];
  for (std::int64_t j = 0; j < Np; ++j) dot[j] = 0.0f;
  for (std::int64_t r = 0; r < N; ++r) {
    const float *p = P + r * Np, *d = dP + r * Np;
    for (std::int64_t j = 0; j < Np; ++j) dot[j] += p[j] * d[j];
  }
  for (std::int64_t r = 0; r < N; ++r) {
    const float* p = P + r * Np;
    float* d = dP + r * Np;
    for (std::int64_t j = 0; j < Np; ++j) d[j] = scale * (p[j] * (d[j] - dot[j]));
  }
}

// One round of a 16 x 16 transpose held as 16 row vectors: in every 2S x 2S block, the top-right and
// bottom-left S x S quarters trade places (row i with bit S clear pairs with row i + S). The rounds for
// S = 8, 4, 2, 1 swap each bit of the row index with the same bit of the column index, which is the
// transpose: 64 two-vector shuffles (vpermt2ps) where the element-by-element copy makes 256 scalar stores
// and as many loads, at a stride of a row.
typedef int LaneIndices __attribute__((vector_size(kLanes * sizeof(int))));
// Lane c of the new row i takes (c & S ? row i + S's lane c - S : row i's lane c); lane c of the new row
// i + S takes (c & S ? row i + S's lane c : row i's lane c + S). Indices >= 16 pick the second row.
template <int S, typename Lanes_> struct RoundIndices;
template <int S, int... c> struct RoundIndices<S, std::integer_sequence<int, c...>> {
  static constexpr LaneIndices lower{((c & S) ? 16 + c - S : c)...};
  static constexpr LaneIndices upper{((c & S) ? 16 + c : c + S)...};
};
template <int S>
__attribute__((always_inline)) inline void transpose_round(Lanes (&rows)[kLanes]) {
  using Indices = RoundIndices<S, std::make_integer_sequence<int, kLanes>>;
#pragma GCC unroll 16
  for (int i = 0; i < kLanes; ++i) {
    if (i & S) continue;
    const Lanes a = rows[i], b = rows[i + S];
    rows[i] = __builtin_shuffle(a, b, Indices::lower);
    rows[i + S] = __builtin_shuffle(a, b, Indices::upper);
  }
}

// The transpose: hd x N of N rows (`stride` apart) into an hd x Np buffer (columns N.. 0), the B operand of
// q k^T and dO v^T. By 16 x 16 blocks in registers; rows past N and columns past hd read as 0.
DEW_KERNEL_BODY void gather_transposed_loop(const float* __restrict from, std::int64_t stride, std::int64_t N, std::int64_t hd,
                                            std::int64_t Np, float* __restrict to) {
  // Every index into `block` is a constant once the loops are unrolled, so the block stays in registers
  // (with a loop index GCC kept it on the stack and the shuffles waited on stores).
  auto load = [&](Lanes& row, std::int64_t i, std::int64_t c0, std::int64_t width) __attribute__((always_inline)) {
    row = Lanes{};
    if (i >= N) return;
    const float* src = from + i * stride + c0;
    if (width == kLanes) {
      row = DEW_LANES_LOAD(src);
    } else {
      __builtin_memcpy(&row, src, static_cast<std::size_t>(width) * sizeof(float));
    }
  };
  for (std::int64_t i0 = 0; i0 < Np; i0 += kLanes) {
    for (std::int64_t c0 = 0; c0 < hd; c0 += kLanes) {
      const std::int64_t width = std::min(kLanes, hd - c0);
      Lanes block[kLanes];
#pragma GCC unroll 16
      for (int t = 0; t < kLanes; ++t) load(block[t], i0 + t, c0, width);
      transpose_round<8>(block);
      transpose_round<4>(block);
      transpose_round<2>(block);
      transpose_round<1>(block);
      float* out = to + c0 * Np + i0;
      if (width == kLanes) {
#pragma GCC unroll 16
        for (int t = 0; t < kLanes; ++t) DEW_LANES_STORE(out + t * Np, block[t]);
      } else {
#pragma GCC unroll 16
        for (int t = 0; t < kLanes; ++t) {
          if (t < width) DEW_LANES_STORE(out + t * Np, block[t]);
        }
      }
    }
  }
}

}  // namespace

void small_gemm(std::int64_t M, std::int64_t n_all, std::int64_t K_all, const float* A, std::int64_t am, std::int64_t ak,
                const float* B, std::int64_t ldb, float* C, std::int64_t ldc, bool accumulate, Band band) {
  on_cpu_isa<small_gemm_loop>(M, n_all, K_all, A, am, ak, B, ldb, C, ldc, accumulate, band);
}
void copy_rows_padded(const float* from, std::int64_t stride, std::int64_t rows, std::int64_t hd, std::int64_t hdp, float factor,
                      float* to) {
  on_cpu_isa<copy_rows_padded_loop>(from, stride, rows, hd, hdp, factor, to);
}
void copy_rows_unpadded(const float* from, std::int64_t rows, std::int64_t hd, std::int64_t hdp, float factor, float* to,
                        std::int64_t stride) {
  on_cpu_isa<copy_rows_unpadded_loop>(from, rows, hd, hdp, factor, to, stride);
}
void softmax_rows(float* S, std::int64_t N, std::int64_t Np, float scale) { on_cpu_isa<softmax_rows_loop>(S, N, Np, scale); }
void softmax_backward_rows(const float* P, float* dP, std::int64_t N, std::int64_t Np, float scale) {
  on_cpu_isa<softmax_backward_rows_loop>(P, dP, N, Np, scale);
}
void softmax_columns(float* S, std::int64_t N, std::int64_t Np, float scale) {
  on_cpu_isa<softmax_columns_loop>(S, N, Np, scale);
}
void softmax_backward_columns(const float* P, float* dP, std::int64_t N, std::int64_t Np, float scale) {
  on_cpu_isa<softmax_backward_columns_loop>(P, dP, N, Np, scale);
}
void gather_transposed(const float* from, std::int64_t stride, std::int64_t N, std::int64_t hd, std::int64_t Np, float* to) {
  on_cpu_isa<gather_transposed_loop>(from, stride, N, hd, Np, to);
}

}  // namespace dew::nn::kernels
