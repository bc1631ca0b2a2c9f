// Without trapping math, GCC can if-convert fast_exp's clamps and vectorise the softmax rows; nothing here
// reads floating-point exception flags.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include "dew/nn/short_attention.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "dew/nn/cpu_kernel.h"
#include "dew/nn/fast_exp.h"

namespace dew::nn {

namespace {

std::int64_t round_up(std::int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

// Which part of a product a causal mask leaves non-zero, for rows m..m+3 of C (row m of A is query m, or
// key m for the transposed products): all of it; the columns up to the row (scores; the rest is written 0);
// the depth up to the row (P V and dS K: P is 0 beyond); the depth from the row (P^T dO and dS^T Q).
enum class Band { kFull, kColumnsToRow, kDepthToRow, kDepthFromRow };

// C[m, 0:n] (+)= sum_k A[m, k] B[k, 0:n] for m < M, n a multiple of kLanes. A's element (m, k) is at
// A[m * am + k * ak], so a transposed A costs nothing (its four scalars a step are then adjacent); B and C
// have rows ldb and ldc apart. Four rows by two vectors of columns at a time: eight accumulators stay in
// registers over k and each loaded row of B feeds eight multiply-adds.
DEW_CPU_CLONES void small_gemm(std::int64_t M, std::int64_t n_all, std::int64_t K_all, const float* __restrict A, std::int64_t am,
                               std::int64_t ak, const float* __restrict B, std::int64_t ldb, float* __restrict C, std::int64_t ldc,
                               bool accumulate, Band band) {
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
DEW_CPU_CLONES void copy_rows_padded(const float* __restrict from, std::int64_t stride, std::int64_t rows, std::int64_t hd,
                                     std::int64_t hdp, float factor, float* __restrict to) {
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* src = from + i * stride;
    float* dst = to + i * hdp;
    for (std::int64_t c = 0; c < hd; ++c) dst[c] = src[c] * factor;
    for (std::int64_t c = hd; c < hdp; ++c) dst[c] = 0.0f;
  }
}

// Rows of hdp floats back into rows of hd `stride` apart, times `factor`.
DEW_CPU_CLONES void copy_rows_unpadded(const float* __restrict from, std::int64_t rows, std::int64_t hd, std::int64_t hdp,
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
DEW_CPU_CLONES void softmax_rows(float* __restrict S, std::int64_t N, std::int64_t Np, float scale) {
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
DEW_CPU_CLONES void softmax_backward_rows(const float* __restrict P, float* __restrict dP, std::int64_t N, std::int64_t Np, float scale) {
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
DEW_CPU_CLONES void softmax_columns(float* __restrict S, std::int64_t N, std::int64_t Np, float scale) {
  float top[kShortAttentionMaxTokens], sum[kShortAttentionMaxTokens];
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
DEW_CPU_CLONES void softmax_backward_columns(const float* __restrict P, float* __restrict dP, std::int64_t N, std::int64_t Np,
                                             float scale) {
  float dot[kShortAttentionMaxTokens];
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

// A [B, heads, N, hd] float tensor's element strides; its last stride is 1.
struct Strided {
  float* data;
  std::int64_t sb, sh, sn;
  explicit Strided(const at::Tensor& t) : data(t.data_ptr<float>()), sb(t.stride(0)), sh(t.stride(1)), sn(t.stride(2)) {}
  float* row(std::int64_t b, std::int64_t h, std::int64_t i) const { return data + b * sb + h * sh + i * sn; }
};

struct Dims {
  std::int64_t B, H, Hkv, N, hd, hdp, Np;
  float scale;
  bool causal;
  Dims(std::int64_t B_, std::int64_t H_, std::int64_t Hkv_, std::int64_t N_, std::int64_t hd_, bool causal_, double scale_)
      : B(B_), H(H_), Hkv(Hkv_), N(N_), hd(hd_), hdp(round_up(hd_)), Np(round_up(N_)), scale(static_cast<float>(scale_)),
        causal(causal_) {}
  std::int64_t group() const { return H / Hkv; }
  // Rows whose length is a whole number of vectors are read and written where they lie; others go
  // through padded copies.
  bool in_place() const { return hd == hdp; }
};

// The N x hd rows of (b, h) as a matrix whose rows hold hdp columns: the tensor itself when in place, else
// a padded copy in `buffer`.
struct Rows {
  float* data;
  std::int64_t stride;
};
Rows readable_rows(const Strided& t, std::int64_t b, std::int64_t h, const Dims& d, float* buffer) {
  if (d.in_place()) return {t.row(b, h, 0), t.sn};
  copy_rows_padded(t.row(b, h, 0), t.sn, d.N, d.hd, d.hdp, 1.0f, buffer);
  return {buffer, d.hdp};
}
// Where a product for (b, h)'s rows is written: the tensor, or `buffer` to be copied out by finish_rows.
Rows writable_rows(const Strided& t, std::int64_t b, std::int64_t h, const Dims& d, float* buffer) {
  return d.in_place() ? Rows{t.row(b, h, 0), t.sn} : Rows{buffer, d.hdp};
}
void finish_rows(const Rows& rows, const Strided& t, std::int64_t b, std::int64_t h, const Dims& d) {
  if (!d.in_place()) copy_rows_unpadded(rows.data, d.N, d.hd, d.hdp, 1.0f, t.row(b, h, 0), t.sn);
}
void zero_rows(const Rows& rows, const Dims& d) {
  for (std::int64_t i = 0; i < d.N; ++i) std::fill(rows.data + i * rows.stride, rows.data + i * rows.stride + d.hdp, 0.0f);
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

// The transpose: hd x N of the tensor's rows into an hd x Np buffer (columns N.. 0), the B operand of
// q k^T and dO v^T. By 16 x 16 blocks in registers; rows past N and columns past hd read as 0.
DEW_CPU_CLONES void gather_transposed(const Strided& from, std::int64_t b, std::int64_t h, const Dims& d, float* __restrict to) {
  // Every index into `block` is a constant once the loops are unrolled, so the block stays in registers
  // (with a loop index GCC kept it on the stack and the shuffles waited on stores).
  auto load = [&](Lanes& row, std::int64_t i, std::int64_t c0, std::int64_t width) __attribute__((always_inline)) {
    row = Lanes{};
    if (i >= d.N) return;
    const float* src = from.row(b, h, i) + c0;
    if (width == kLanes) {
      row = DEW_LANES_LOAD(src);
    } else {
      __builtin_memcpy(&row, src, static_cast<std::size_t>(width) * sizeof(float));
    }
  };
  for (std::int64_t i0 = 0; i0 < d.Np; i0 += kLanes) {
    for (std::int64_t c0 = 0; c0 < d.hd; c0 += kLanes) {
      const std::int64_t width = std::min(kLanes, d.hd - c0);
      Lanes block[kLanes];
#pragma GCC unroll 16
      for (int t = 0; t < kLanes; ++t) load(block[t], i0 + t, c0, width);
      transpose_round<8>(block);
      transpose_round<4>(block);
      transpose_round<2>(block);
      transpose_round<1>(block);
      float* out = to + c0 * d.Np + i0;
      if (width == kLanes) {
#pragma GCC unroll 16
        for (int t = 0; t < kLanes; ++t) DEW_LANES_STORE(out + t * d.Np, block[t]);
      } else {
#pragma GCC unroll 16
        for (int t = 0; t < kLanes; ++t) {
          if (t < width) DEW_LANES_STORE(out + t * d.Np, block[t]);
        }
      }
    }
  }
}

// The forward into `out` ([B, H, N, hd] strides); with `kept` ([B, H, N, Np]) it keeps each head's softmax
// for the backward: row-major (query rows) when causal, key-major (softmax_columns) otherwise.
void run_forward(const Strided& Q, const Strided& K, const Strided& V, const Strided& out, const Dims& d, float* kept) {
  at::parallel_for(0, d.B * d.Hkv, 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> transposed(d.hd * d.Np), scores(d.N * d.Np), padded_v, padded_o;
    if (!d.in_place()) padded_v.resize(d.N * d.hdp), padded_o.resize(d.N * d.hdp);
    for (std::int64_t unit = begin; unit < end; ++unit) {
      const std::int64_t b = unit / d.Hkv, kv_head = unit % d.Hkv;
      if (d.causal) gather_transposed(K, b, kv_head, d, transposed.data());  // k^T, shared by the group
      const Rows v = readable_rows(V, b, kv_head, d, padded_v.data());
      for (std::int64_t g = 0; g < d.group(); ++g) {
        const std::int64_t h = kv_head * d.group() + g;
        float* p = kept != nullptr ? kept + (b * d.H + h) * d.N * d.Np : scores.data();
        const Rows o = writable_rows(out, b, h, d, padded_o.data());
        if (d.causal) {  // P = softmax(scale q k^T) by query rows, then P v
          small_gemm(d.N, d.Np, d.hd, Q.row(b, h, 0), Q.sn, 1, transposed.data(), d.Np, p, d.Np, false, Band::kColumnsToRow);
          softmax_rows(p, d.N, d.Np, d.scale);
          small_gemm(d.N, d.hdp, d.N, p, d.Np, 1, v.data, v.stride, o.data, o.stride, false, Band::kDepthToRow);
        } else {  // P^T = softmax over keys of (k q^T), then (P^T)^T v
          gather_transposed(Q, b, h, d, transposed.data());
          small_gemm(d.N, d.Np, d.hd, K.row(b, kv_head, 0), K.sn, 1, transposed.data(), d.Np, p, d.Np, false, Band::kFull);
          softmax_columns(p, d.N, d.Np, d.scale);
          small_gemm(d.N, d.hdp, d.N, p, 1, d.Np, v.data, v.stride, o.data, o.stride, false, Band::kFull);
        }
        finish_rows(o, out, b, h, d);
      }
    }
  });
}

// The backward from the kept softmax P: with S = scale q k^T and dS' = scale P (dP - rowsum(P dP)),
//   dV = P^T dO,  dP = dO V^T,  dQ = dS' K,  dK = dS'^T Q.
// Causal runs keep P and dS' by query rows; the others keep them key-major (P^T, dS'^T), so there the
// transposes are the other way round: dP^T = V dO^T and dQ reads dS'^T down its columns.
// Each unit (one image or row, one key/value head) owns its rows of dk and dv, so units run in parallel.
void run_backward(const Strided& Q, const Strided& K, const Strided& V, const float* kept, const Strided& dO, const Strided& dQ,
                  const Strided& dK, const Strided& dV, const Dims& d) {
  at::parallel_for(0, d.B * d.Hkv, 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> transposed(d.hd * d.Np), ds(d.N * d.Np), pad_k, pad_q, pad_do, pad_dq, pad_dk, pad_dv;
    if (!d.in_place()) {
      for (auto* buffer : {&pad_k, &pad_q, &pad_do, &pad_dq, &pad_dk, &pad_dv}) buffer->resize(d.N * d.hdp);
    }
    for (std::int64_t unit = begin; unit < end; ++unit) {
      const std::int64_t b = unit / d.Hkv, kv_head = unit % d.Hkv;
      const Rows k = readable_rows(K, b, kv_head, d, pad_k.data());
      if (d.causal) gather_transposed(V, b, kv_head, d, transposed.data());  // v^T, shared by the group
      const Rows dk = writable_rows(dK, b, kv_head, d, pad_dk.data()), dv = writable_rows(dV, b, kv_head, d, pad_dv.data());
      zero_rows(dk, d);
      zero_rows(dv, d);
      for (std::int64_t g = 0; g < d.group(); ++g) {
        const std::int64_t h = kv_head * d.group() + g;
        const float* p = kept + (b * d.H + h) * d.N * d.Np;
        const Rows q = readable_rows(Q, b, h, d, pad_q.data()), d_out = readable_rows(dO, b, h, d, pad_do.data());
        const Rows dq = writable_rows(dQ, b, h, d, pad_dq.data());
        if (d.causal) {
          small_gemm(d.N, d.hdp, d.N, p, 1, d.Np, d_out.data, d_out.stride, dv.data, dv.stride, true, Band::kDepthFromRow);
          small_gemm(d.N, d.Np, d.hd, dO.row(b, h, 0), dO.sn, 1, transposed.data(), d.Np, ds.data(), d.Np, false,
                     Band::kColumnsToRow);
          softmax_backward_rows(p, ds.data(), d.N, d.Np, d.scale);
          small_gemm(d.N, d.hdp, d.N, ds.data(), d.Np, 1, k.data, k.stride, dq.data, dq.stride, false, Band::kDepthToRow);
          small_gemm(d.N, d.hdp, d.N, ds.data(), 1, d.Np, q.data, q.stride, dk.data, dk.stride, true, Band::kDepthFromRow);
        } else {
          small_gemm(d.N, d.hdp, d.N, p, d.Np, 1, d_out.data, d_out.stride, dv.data, dv.stride, true, Band::kFull);
          gather_transposed(dO, b, h, d, transposed.data());
          small_gemm(d.N, d.Np, d.hd, V.row(b, kv_head, 0), V.sn, 1, transposed.data(), d.Np, ds.data(), d.Np, false, Band::kFull);
          softmax_backward_columns(p, ds.data(), d.N, d.Np, d.scale);
          small_gemm(d.N, d.hdp, d.N, ds.data(), 1, d.Np, k.data, k.stride, dq.data, dq.stride, false, Band::kFull);
          small_gemm(d.N, d.hdp, d.N, ds.data(), d.Np, 1, q.data, q.stride, dk.data, dk.stride, true, Band::kFull);
        }
        finish_rows(dq, dQ, b, h, d);
      }
      finish_rows(dk, dK, b, kv_head, d);
      finish_rows(dv, dV, b, kv_head, d);
    }
  });
}

// [B, N, heads, hd] contiguous, viewed [B, heads, N, hd]: the layout outputs and gradients are made in.
at::Tensor heads_view(std::int64_t B, std::int64_t N, std::int64_t heads, std::int64_t hd, const at::TensorOptions& options) {
  return at::empty({B, N, heads, hd}, options).transpose(1, 2);
}

Dims dims_of(const at::Tensor& q, const at::Tensor& k, bool causal, double scale) {
  return Dims(q.size(0), q.size(1), k.size(1), q.size(2), q.size(3), causal, scale);
}

// q, k and v given apart ([B, heads, N, hd] views, last stride 1).
struct ShortAttentionFunction : public torch::autograd::Function<ShortAttentionFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            bool causal, double scale) {
    const Dims d = dims_of(q, k, causal, scale);
    at::Tensor probabilities = at::empty({d.B, d.H, d.N, d.Np}, q.options());
    at::Tensor out = heads_view(d.B, d.N, d.H, d.hd, q.options());
    run_forward(Strided(q), Strided(k), Strided(v), Strided(out), d, probabilities.data_ptr<float>());
    ctx->save_for_backward({q, k, v, probabilities});
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Dims d = dims_of(saved[0], saved[1], ctx->saved_data["causal"].toBool(), ctx->saved_data["scale"].toDouble());
    at::Tensor grad = grads[0].to(at::kFloat);
    if (grad.stride(-1) != 1) grad = grad.contiguous();
    at::Tensor dq = heads_view(d.B, d.N, d.H, d.hd, grad.options()), dk = heads_view(d.B, d.N, d.Hkv, d.hd, grad.options()),
               dv = heads_view(d.B, d.N, d.Hkv, d.hd, grad.options());
    run_backward(Strided(saved[0]), Strided(saved[1]), Strided(saved[2]), saved[3].data_ptr<float>(), Strided(grad), Strided(dq),
                 Strided(dk), Strided(dv), d);
    return {dq, dk, dv, at::Tensor(), at::Tensor()};
  }
};

// q, k and v of one packed projection [B, N, 3 * H * hd]: the [B, heads, N, hd] view of part `which`.
at::Tensor packed_part(const at::Tensor& qkv, std::int64_t heads, std::int64_t which) {
  const auto B = qkv.size(0), N = qkv.size(1), hd = qkv.size(2) / (3 * heads);
  return qkv.view({B, N, 3, heads, hd}).select(2, which).transpose(1, 2);
}

// The packed form: the gradient of q, k and v is written into one [B, N, 3 * H * hd] tensor, the layout of
// the projection's output, so autograd neither stacks three gradients nor copies a transposed one.
struct PackedAttentionFunction : public torch::autograd::Function<PackedAttentionFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& qkv, std::int64_t heads, bool causal, double scale) {
    const auto q = packed_part(qkv, heads, 0), k = packed_part(qkv, heads, 1), v = packed_part(qkv, heads, 2);
    const Dims d = dims_of(q, k, causal, scale);
    at::Tensor probabilities = at::empty({d.B, d.H, d.N, d.Np}, qkv.options());
    at::Tensor out = at::empty({d.B, d.N, d.H * d.hd}, qkv.options());
    run_forward(Strided(q), Strided(k), Strided(v), Strided(out.view({d.B, d.N, d.H, d.hd}).transpose(1, 2)), d,
                probabilities.data_ptr<float>());
    ctx->save_for_backward({qkv, probabilities});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto heads = ctx->saved_data["heads"].toInt();
    const auto q = packed_part(saved[0], heads, 0), k = packed_part(saved[0], heads, 1), v = packed_part(saved[0], heads, 2);
    const Dims d = dims_of(q, k, ctx->saved_data["causal"].toBool(), ctx->saved_data["scale"].toDouble());
    at::Tensor grad = grads[0].to(at::kFloat).contiguous();
    at::Tensor dqkv = at::empty(saved[0].sizes(), grad.options());
    run_backward(Strided(q), Strided(k), Strided(v), saved[1].data_ptr<float>(),
                 Strided(grad.view({d.B, d.N, d.H, d.hd}).transpose(1, 2)), Strided(packed_part(dqkv, heads, 0)),
                 Strided(packed_part(dqkv, heads, 1)), Strided(packed_part(dqkv, heads, 2)), d);
    return {dqkv, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor unit_stride_rows(const at::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); }

bool grad_needed(std::initializer_list<const at::Tensor*> tensors) {
  if (!at::GradMode::is_enabled()) return false;
  for (const auto* t : tensors) {
    if (t->requires_grad()) return true;
  }
  return false;
}

}  // namespace

bool short_attention_applies(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4 || k.sizes() != v.sizes()) return false;
  for (const auto* t : {&q, &k, &v}) {
    if (!t->device().is_cpu() || t->scalar_type() != at::kFloat) return false;
  }
  const auto N = q.size(2), hd = q.size(3);
  return k.size(0) == q.size(0) && k.size(2) == N && k.size(3) == hd && k.size(1) > 0 && q.size(1) % k.size(1) == 0 &&
         N >= 1 && N <= kShortAttentionMaxTokens && hd >= 1 && hd <= 256 && q.size(0) >= 1;
}

at::Tensor short_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, double scale) {
  TORCH_CHECK(short_attention_applies(q, k, v), "short_attention: unsupported inputs q ", q.sizes(), " ", q.scalar_type(),
              ", k ", k.sizes(), ", v ", v.sizes());
  const at::Tensor qr = unit_stride_rows(q), kr = unit_stride_rows(k), vr = unit_stride_rows(v);
  if (grad_needed({&q, &k, &v})) return ShortAttentionFunction::apply(qr, kr, vr, causal, scale);
  const Dims d = dims_of(qr, kr, causal, scale);
  at::Tensor out = heads_view(d.B, d.N, d.H, d.hd, q.options());
  run_forward(Strided(qr), Strided(kr), Strided(vr), Strided(out), d, nullptr);
  return out;
}

bool short_attention_packed_applies(const at::Tensor& qkv, std::int64_t heads) {
  if (qkv.dim() != 3 || heads < 1 || qkv.size(2) % (3 * heads) != 0 || !qkv.is_contiguous()) return false;
  const auto q = packed_part(qkv, heads, 0);
  return short_attention_applies(q, q, q);
}

at::Tensor short_attention_packed(const at::Tensor& qkv, std::int64_t heads, bool causal, double scale) {
  TORCH_CHECK(short_attention_packed_applies(qkv, heads), "short_attention_packed: unsupported input ", qkv.sizes(), " ",
              qkv.scalar_type(), " with ", heads, " heads");
  if (grad_needed({&qkv})) return PackedAttentionFunction::apply(qkv, heads, causal, scale);
  const auto q = packed_part(qkv, heads, 0), k = packed_part(qkv, heads, 1), v = packed_part(qkv, heads, 2);
  const Dims d = dims_of(q, k, causal, scale);
  at::Tensor out = at::empty({d.B, d.N, d.H * d.hd}, qkv.options());
  run_forward(Strided(q), Strided(k), Strided(v), Strided(out.view({d.B, d.N, d.H, d.hd}).transpose(1, 2)), d, nullptr);
  return out;
}

at::Tensor attention_short_or_sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, double scale) {
  if (short_attention_applies(q, k, v)) {
    return short_attention(q, k, v, causal, scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(q.size(3))));
  }
  std::optional<double> sdpa_scale;
  if (scale > 0) sdpa_scale = scale;
  return at::scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, causal, sdpa_scale, /*enable_gqa=*/q.size(1) != k.size(1));
}

at::Tensor attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, double scale) {
  const auto group = q.size(1) / k.size(1);
  auto kd = k.to(at::kDouble).repeat_interleave(group, 1), vd = v.to(at::kDouble).repeat_interleave(group, 1);
  auto scores = at::matmul(q.to(at::kDouble), kd.transpose(-1, -2)) * scale;
  if (causal) {
    const auto N = q.size(2);
    scores = scores.masked_fill(at::ones({N, N}, at::kBool).triu(1), -std::numeric_limits<double>::infinity());
  }
  return at::matmul(scores.softmax(-1), vd).to(q.scalar_type());
}

}  // namespace dew::nn
