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

#include "dew/nn/kernels/lanes.h"
#include "dew/nn/kernels/short_attention.h"

namespace dew::nn {

namespace {

using kernels::Band;
using kernels::kLanes;

std::int64_t round_up(std::int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

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
  kernels::copy_rows_padded(t.row(b, h, 0), t.sn, d.N, d.hd, d.hdp, 1.0f, buffer);
  return {buffer, d.hdp};
}
// Where a product for (b, h)'s rows is written: the tensor, or `buffer` to be copied out by finish_rows.
Rows writable_rows(const Strided& t, std::int64_t b, std::int64_t h, const Dims& d, float* buffer) {
  return d.in_place() ? Rows{t.row(b, h, 0), t.sn} : Rows{buffer, d.hdp};
}
void finish_rows(const Rows& rows, const Strided& t, std::int64_t b, std::int64_t h, const Dims& d) {
  if (!d.in_place()) kernels::copy_rows_unpadded(rows.data, d.N, d.hd, d.hdp, 1.0f, t.row(b, h, 0), t.sn);
}
void zero_rows(const Rows& rows, const Dims& d) {
  for (std::int64_t i = 0; i < d.N; ++i) std::fill(rows.data + i * rows.stride, rows.data + i * rows.stride + d.hdp, 0.0f);
}

// The hd x N of (b, h)'s rows transposed into an hd x Np buffer (kernels::gather_transposed).
void gather_transposed(const Strided& from, std::int64_t b, std::int64_t h, const Dims& d, float* to) {
  kernels::gather_transposed(from.row(b, h, 0), from.sn, d.N, d.hd, d.Np, to);
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
          kernels::small_gemm(d.N, d.Np, d.hd, Q.row(b, h, 0), Q.sn, 1, transposed.data(), d.Np, p, d.Np, false, Band::kColumnsToRow);
          kernels::softmax_rows(p, d.N, d.Np, d.scale);
          kernels::small_gemm(d.N, d.hdp, d.N, p, d.Np, 1, v.data, v.stride, o.data, o.stride, false, Band::kDepthToRow);
        } else {  // P^T = softmax over keys of (k q^T), then (P^T)^T v
          gather_transposed(Q, b, h, d, transposed.data());
          kernels::small_gemm(d.N, d.Np, d.hd, K.row(b, kv_head, 0), K.sn, 1, transposed.data(), d.Np, p, d.Np, false, Band::kFull);
          kernels::softmax_columns(p, d.N, d.Np, d.scale);
          kernels::small_gemm(d.N, d.hdp, d.N, p, 1, d.Np, v.data, v.stride, o.data, o.stride, false, Band::kFull);
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
          kernels::small_gemm(d.N, d.hdp, d.N, p, 1, d.Np, d_out.data, d_out.stride, dv.data, dv.stride, true, Band::kDepthFromRow);
          kernels::small_gemm(d.N, d.Np, d.hd, dO.row(b, h, 0), dO.sn, 1, transposed.data(), d.Np, ds.data(), d.Np, false,
                     Band::kColumnsToRow);
          kernels::softmax_backward_rows(p, ds.data(), d.N, d.Np, d.scale);
          kernels::small_gemm(d.N, d.hdp, d.N, ds.data(), d.Np, 1, k.data, k.stride, dq.data, dq.stride, false, Band::kDepthToRow);
          kernels::small_gemm(d.N, d.hdp, d.N, ds.data(), 1, d.Np, q.data, q.stride, dk.data, dk.stride, true, Band::kDepthFromRow);
        } else {
          kernels::small_gemm(d.N, d.hdp, d.N, p, d.Np, 1, d_out.data, d_out.stride, dv.data, dv.stride, true, Band::kFull);
          gather_transposed(dO, b, h, d, transposed.data());
          kernels::small_gemm(d.N, d.Np, d.hd, V.row(b, kv_head, 0), V.sn, 1, transposed.data(), d.Np, ds.data(), d.Np, false, Band::kFull);
          kernels::softmax_backward_columns(p, ds.data(), d.N, d.Np, d.scale);
          kernels::small_gemm(d.N, d.hdp, d.N, ds.data(), 1, d.Np, k.data, k.stride, dq.data, dq.stride, false, Band::kFull);
          kernels::small_gemm(d.N, d.hdp, d.N, ds.data(), d.Np, 1, q.data, q.stride, dk.data, dk.stride, true, Band::kFull);
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
