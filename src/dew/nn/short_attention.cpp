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
#include <vector>

#include "dew/nn/fast_exp.h"

namespace dew::nn {

namespace {

constexpr std::int64_t kLanes = 16;
// Sixteen floats: one AVX-512 register, two AVX2 ones (GCC splits the operations for each clone).
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));

std::int64_t round_up(std::int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

#define DEW_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

// Unaligned vector moves, as macros so they compile inside each clone (a helper function would be built
// for the baseline ISA and pass its vectors through memory).
#define DEW_LOAD(p) ({ Lanes v_; __builtin_memcpy(&v_, (p), sizeof v_); v_; })
#define DEW_STORE(p, v) __builtin_memcpy((p), &(v), sizeof(Lanes))

// Which part of a product a causal mask leaves non-zero, for rows m..m+3 of C (row m of A is query m, or
// key m for the transposed products): all of it; the columns up to the row (scores; the rest is written 0);
// the depth up to the row (P V and dS K: P is 0 beyond); the depth from the row (P^T dO and dS^T Q).
enum class Band { kFull, kColumnsToRow, kDepthToRow, kDepthFromRow };

// C[m, 0:n] (+)= sum_k A[m, k] B[k, 0:n] for m < M, n a multiple of kLanes. A's element (m, k) is at
// A[m * am + k * ak], so a transposed A costs nothing (its four scalars a step are then adjacent); B and C
// have rows ldb and ldc apart. Four rows by two vectors of columns at a time: eight accumulators stay in
// registers over k and each loaded row of B feeds eight multiply-adds.
DEW_CLONES void small_gemm(std::int64_t M, std::int64_t n_all, std::int64_t K_all, const float* __restrict A, std::int64_t am,
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
        x0 = DEW_LOAD(c0 + j), y0 = DEW_LOAD(c0 + j + kLanes), x1 = DEW_LOAD(c1 + j), y1 = DEW_LOAD(c1 + j + kLanes);
        x2 = DEW_LOAD(c2 + j), y2 = DEW_LOAD(c2 + j + kLanes), x3 = DEW_LOAD(c3 + j), y3 = DEW_LOAD(c3 + j + kLanes);
      }
      const float* b = B + k_begin * ldb + j;
      const float* a = A + m * am + k_begin * ak;
      for (std::int64_t k = k_begin; k < K; ++k, b += ldb, a += ak) {
        const Lanes u = DEW_LOAD(b), w = DEW_LOAD(b + kLanes);
        const float s0 = a[0], s1 = a[am], s2 = a[2 * am], s3 = a[3 * am];
        x0 += s0 * u, y0 += s0 * w, x1 += s1 * u, y1 += s1 * w;
        x2 += s2 * u, y2 += s2 * w, x3 += s3 * u, y3 += s3 * w;
      }
      DEW_STORE(c0 + j, x0), DEW_STORE(c0 + j + kLanes, y0), DEW_STORE(c1 + j, x1), DEW_STORE(c1 + j + kLanes, y1);
      DEW_STORE(c2 + j, x2), DEW_STORE(c2 + j + kLanes, y2), DEW_STORE(c3 + j, x3), DEW_STORE(c3 + j + kLanes, y3);
    }
    for (; j < n; j += kLanes) {
      Lanes x0 = {}, x1 = {}, x2 = {}, x3 = {};
      if (accumulate) x0 = DEW_LOAD(c0 + j), x1 = DEW_LOAD(c1 + j), x2 = DEW_LOAD(c2 + j), x3 = DEW_LOAD(c3 + j);
      const float* b = B + k_begin * ldb + j;
      const float* a = A + m * am + k_begin * ak;
      for (std::int64_t k = k_begin; k < K; ++k, b += ldb, a += ak) {
        const Lanes u = DEW_LOAD(b);
        x0 += a[0] * u, x1 += a[am] * u, x2 += a[2 * am] * u, x3 += a[3 * am] * u;
      }
      DEW_STORE(c0 + j, x0), DEW_STORE(c1 + j, x1), DEW_STORE(c2 + j, x2), DEW_STORE(c3 + j, x3);
    }
  }
  for (; m < M; ++m) {
    float* c = C + m * ldc;
    const std::int64_t n = band == Band::kColumnsToRow ? std::min(n_all, (m + kLanes) / kLanes * kLanes) : n_all;
    const std::int64_t k_begin = band == Band::kDepthFromRow ? m : 0;
    const std::int64_t K = band == Band::kDepthToRow ? std::min(K_all, m + 1) : K_all;
    for (std::int64_t j = n; j < n_all; ++j) c[j] = 0.0f;
    for (std::int64_t j = 0; j < n; j += kLanes) {
      Lanes x = accumulate ? DEW_LOAD(c + j) : Lanes{};
      const float* b = B + k_begin * ldb + j;
      const float* a = A + m * am + k_begin * ak;
      for (std::int64_t k = k_begin; k < K; ++k, b += ldb, a += ak) x += a[0] * DEW_LOAD(b);
      DEW_STORE(c + j, x);
    }
  }
}

// Rows of hd floats from `rows` pointers `stride` apart into rows of hdp (times `factor`), the padding 0.
DEW_CLONES void copy_rows_padded(const float* __restrict from, std::int64_t stride, std::int64_t rows, std::int64_t hd,
                                 std::int64_t hdp, float factor, float* __restrict to) {
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* src = from + i * stride;
    float* dst = to + i * hdp;
    for (std::int64_t c = 0; c < hd; ++c) dst[c] = src[c] * factor;
    for (std::int64_t c = hd; c < hdp; ++c) dst[c] = 0.0f;
  }
}

// Rows of hdp floats back into rows of hd `stride` apart, times `factor`.
DEW_CLONES void copy_rows_unpadded(const float* __restrict from, std::int64_t rows, std::int64_t hd, std::int64_t hdp,
                                   float factor, float* __restrict to, std::int64_t stride) {
  for (std::int64_t i = 0; i < rows; ++i) {
    const float* src = from + i * hdp;
    float* dst = to + i * stride;
    for (std::int64_t c = 0; c < hd; ++c) dst[c] = src[c] * factor;
  }
}

// Row i of the N x Np scores becomes softmax over its first `i + 1` (causal) or N entries; the rest 0.
DEW_CLONES void softmax_rows(float* __restrict S, std::int64_t N, std::int64_t Np, bool causal) {
  for (std::int64_t i = 0; i < N; ++i) {
    float* s = S + i * Np;
    const std::int64_t valid = causal ? i + 1 : N;
    float top = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j < valid; ++j) top = s[j] > top ? s[j] : top;
    float sum = 0.0f;
    for (std::int64_t j = 0; j < valid; ++j) {
      const float e = fast_exp(s[j] - top);
      s[j] = e;
      sum += e;
    }
    const float inverse = 1.0f / sum;
    for (std::int64_t j = 0; j < valid; ++j) s[j] *= inverse;
    for (std::int64_t j = valid; j < Np; ++j) s[j] = 0.0f;
  }
}

// dS = P * (dP - rowsum(P * dP)), in place of dP: the softmax's backward (P is 0 where masked or padded).
DEW_CLONES void softmax_backward_rows(const float* __restrict P, float* __restrict dP, std::int64_t N, std::int64_t Np) {
  for (std::int64_t i = 0; i < N; ++i) {
    const float* p = P + i * Np;
    float* d = dP + i * Np;
    float dot = 0.0f;
    for (std::int64_t j = 0; j < Np; ++j) dot += p[j] * d[j];
    for (std::int64_t j = 0; j < Np; ++j) d[j] = p[j] * (d[j] - dot);
  }
}

#undef DEW_LOAD
#undef DEW_STORE
#undef DEW_CLONES

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
  Dims(const at::Tensor& q, const at::Tensor& k, bool causal_, double scale_)
      : B(q.size(0)), H(q.size(1)), Hkv(k.size(1)), N(q.size(2)), hd(q.size(3)), hdp(round_up(q.size(3))),
        Np(round_up(q.size(2))), scale(static_cast<float>(scale_)), causal(causal_) {}
  std::int64_t group() const { return H / Hkv; }
};

// N x hd from a strided tensor into an N x hdp buffer (times `factor`), the padding 0.
void gather_rows(const Strided& from, std::int64_t b, std::int64_t h, const Dims& d, float factor, float* to) {
  copy_rows_padded(from.row(b, h, 0), from.sn, d.N, d.hd, d.hdp, factor, to);
}

// The transpose: hd x N of the tensor's rows into an hdp x Np buffer, the padding 0.
void gather_transposed(const Strided& from, std::int64_t b, std::int64_t h, const Dims& d, float* to) {
  std::fill(to, to + d.hdp * d.Np, 0.0f);
  for (std::int64_t i = 0; i < d.N; ++i) {
    const float* src = from.row(b, h, i);
    for (std::int64_t c = 0; c < d.hd; ++c) to[c * d.Np + i] = src[c];
  }
}

// Rows of a contiguous [B, N, heads, hd] tensor.
float* bnhd_row(float* base, const Dims& d, std::int64_t heads, std::int64_t b, std::int64_t i, std::int64_t h) {
  return base + ((b * d.N + i) * heads + h) * d.hd;
}

void scatter_rows(const float* from, const Dims& d, float factor, float* base, std::int64_t heads, std::int64_t b, std::int64_t h) {
  copy_rows_unpadded(from, d.N, d.hd, d.hdp, factor, bnhd_row(base, d, heads, b, 0, h), heads * d.hd);
}

// The forward: out [B, N, H, hd] contiguous; with `probabilities` ([B, H, N, Np]) it keeps each head's
// softmax for the backward.
at::Tensor run_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Dims& d, at::Tensor* probabilities) {
  at::Tensor out = at::empty({d.B, d.N, d.H, d.hd}, q.options());
  const Strided Q(q), K(k), V(v);
  float* out_data = out.data_ptr<float>();
  float* kept = probabilities != nullptr ? probabilities->data_ptr<float>() : nullptr;
  auto causal_or = [&d](Band band) { return d.causal ? band : Band::kFull; };
  at::parallel_for(0, d.B * d.Hkv, 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> qs(d.N * d.hdp), kt(d.hdp * d.Np), vs(d.Np * d.hdp, 0.0f), scores(d.N * d.Np), o(d.N * d.hdp);
    for (std::int64_t unit = begin; unit < end; ++unit) {
      const std::int64_t b = unit / d.Hkv, kv_head = unit % d.Hkv;
      gather_transposed(K, b, kv_head, d, kt.data());
      gather_rows(V, b, kv_head, d, 1.0f, vs.data());  // rows N..Np stay 0
      for (std::int64_t g = 0; g < d.group(); ++g) {
        const std::int64_t h = kv_head * d.group() + g;
        float* p = kept != nullptr ? kept + (b * d.H + h) * d.N * d.Np : scores.data();
        gather_rows(Q, b, h, d, d.scale, qs.data());
        small_gemm(d.N, d.Np, d.hdp, qs.data(), d.hdp, 1, kt.data(), d.Np, p, d.Np, false, causal_or(Band::kColumnsToRow));
        softmax_rows(p, d.N, d.Np, d.causal);
        small_gemm(d.N, d.hdp, d.Np, p, d.Np, 1, vs.data(), d.hdp, o.data(), d.hdp, false, causal_or(Band::kDepthToRow));
        scatter_rows(o.data(), d, 1.0f, out_data, d.H, b, h);
      }
    }
  });
  return out;
}

// The backward from the kept softmax P: with S = scale q k^T,
//   dV = P^T dO,  dP = dO V^T,  dS = P (dP - rowsum(P dP)),  dQ = scale dS K,  dK = scale dS^T Q.
// Each unit (one image or row, one key/value head) owns its rows of dk and dv, so units run in parallel.
std::array<at::Tensor, 3> run_backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& probabilities,
                                       const at::Tensor& grad_out, const Dims& d) {
  at::Tensor dq = at::empty({d.B, d.N, d.H, d.hd}, q.options());
  at::Tensor dk = at::empty({d.B, d.N, d.Hkv, d.hd}, q.options());
  at::Tensor dv = at::empty({d.B, d.N, d.Hkv, d.hd}, q.options());
  const Strided Q(q), K(k), V(v), dO(grad_out);
  const float* kept = probabilities.data_ptr<float>();
  auto causal_or = [&d](Band band) { return d.causal ? band : Band::kFull; };
  at::parallel_for(0, d.B * d.Hkv, 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> ks(d.N * d.hdp), vt(d.hdp * d.Np), qs(d.N * d.hdp), dos(d.N * d.hdp), ds(d.N * d.Np), dqs(d.N * d.hdp), dks(d.N * d.hdp), dvs(d.N * d.hdp);
    for (std::int64_t unit = begin; unit < end; ++unit) {
      const std::int64_t b = unit / d.Hkv, kv_head = unit % d.Hkv;
      gather_rows(K, b, kv_head, d, 1.0f, ks.data());
      gather_transposed(V, b, kv_head, d, vt.data());
      std::fill(dks.begin(), dks.end(), 0.0f);
      std::fill(dvs.begin(), dvs.end(), 0.0f);
      for (std::int64_t g = 0; g < d.group(); ++g) {
        const std::int64_t h = kv_head * d.group() + g;
        const float* p = kept + (b * d.H + h) * d.N * d.Np;
        gather_rows(Q, b, h, d, d.scale, qs.data());
        gather_rows(dO, b, h, d, 1.0f, dos.data());
        small_gemm(d.N, d.hdp, d.N, p, 1, d.Np, dos.data(), d.hdp, dvs.data(), d.hdp, true, causal_or(Band::kDepthFromRow));
        small_gemm(d.N, d.Np, d.hdp, dos.data(), d.hdp, 1, vt.data(), d.Np, ds.data(), d.Np, false, causal_or(Band::kColumnsToRow));
        softmax_backward_rows(p, ds.data(), d.N, d.Np);
        small_gemm(d.N, d.hdp, d.N, ds.data(), d.Np, 1, ks.data(), d.hdp, dqs.data(), d.hdp, false, causal_or(Band::kDepthToRow));
        scatter_rows(dqs.data(), d, d.scale, dq.data_ptr<float>(), d.H, b, h);
        small_gemm(d.N, d.hdp, d.N, ds.data(), 1, d.Np, qs.data(), d.hdp, dks.data(), d.hdp, true, causal_or(Band::kDepthFromRow));  // qs holds scale q
      }
      scatter_rows(dks.data(), d, 1.0f, dk.data_ptr<float>(), d.Hkv, b, kv_head);
      scatter_rows(dvs.data(), d, 1.0f, dv.data_ptr<float>(), d.Hkv, b, kv_head);
    }
  });
  return {dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2)};
}

struct ShortAttentionFunction : public torch::autograd::Function<ShortAttentionFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            bool causal, double scale) {
    const Dims d(q, k, causal, scale);
    at::Tensor probabilities = at::empty({d.B, d.H, d.N, d.Np}, q.options());
    at::Tensor out = run_forward(q, k, v, d, &probabilities);
    ctx->save_for_backward({q, k, v, probabilities});
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    return out.transpose(1, 2);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Dims d(saved[0], saved[1], ctx->saved_data["causal"].toBool(), ctx->saved_data["scale"].toDouble());
    at::Tensor grad = grads[0].to(at::kFloat);
    if (grad.stride(-1) != 1) grad = grad.contiguous();
    auto [dq, dk, dv] = run_backward(saved[0], saved[1], saved[2], saved[3], grad, d);
    return {dq, dk, dv, at::Tensor(), at::Tensor()};
  }
};

at::Tensor unit_stride_rows(const at::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); }

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
  if (at::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad())) {
    return ShortAttentionFunction::apply(qr, kr, vr, causal, scale);
  }
  return run_forward(qr, kr, vr, Dims(qr, kr, causal, scale), nullptr).transpose(1, 2);
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
