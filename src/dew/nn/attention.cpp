#include "dew/nn/attention.h"

#include <cmath>
#include <limits>

#include "dew/nn/short_attention.h"

namespace dew::nn {

namespace {

// softmax(cap * tanh(q k^T * scale / cap) + mask) v, with the keys and values repeated per query group.
at::Tensor softcapped_attention(const at::Tensor& q, at::Tensor k, at::Tensor v, const at::Tensor& mask, bool is_causal,
                                double scale, double cap) {
  auto groups = q.size(1) / k.size(1);
  if (groups > 1) {
    k = k.repeat_interleave(groups, 1);
    v = v.repeat_interleave(groups, 1);
  }
  auto scores = at::matmul(q, k.transpose(2, 3)) * scale;
  scores = at::tanh(scores / cap) * cap;
  at::Tensor allowed = mask;
  if (!allowed.defined() && is_causal) {
    auto S = q.size(2), L = k.size(2);
    allowed = at::ones({S, L}, at::TensorOptions().dtype(at::kBool).device(q.device())).tril(L - S);
  }
  if (allowed.defined()) scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());
  auto probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
  return at::matmul(probs, v);
}

// Rotary positions on the first rotary_dim features of each head, the rest passed through (partial rotary).
at::Tensor rotate(const at::Tensor& x, const RotaryAngles& angles, std::int64_t rotary_dim) {
  if (rotary_dim == x.size(-1)) return apply_rotary(x, angles);
  auto rotated = apply_rotary(x.narrow(-1, 0, rotary_dim).contiguous(), angles);
  return at::cat({rotated, x.narrow(-1, rotary_dim, x.size(-1) - rotary_dim)}, -1);
}

double attention_scale(const CausalTransformerConfig& config) {
  if (config.attention_scale > 0) return config.attention_scale;
  return 1.0 / std::sqrt(config.query_pre_attn_scalar > 0 ? config.query_pre_attn_scalar : double(config.resolved_head_dim()));
}

}  // namespace

AttentionImpl::AttentionImpl(const CausalTransformerConfig& config, c10::ScalarType param_dtype)
    : num_heads(config.num_heads),
      num_kv_heads(config.resolved_kv_heads()),
      head_dim(config.resolved_head_dim()),
      rotary_dim(config.positions == "rotary" ? config.resolved_rotary_dim() : 0),
      qk_norm_per_head(config.qk_norm_per_head),
      scale(attention_scale(config)),
      logit_softcap(config.attn_logit_softcap),
      custom_scale(config.query_pre_attn_scalar > 0 || config.attention_scale > 0) {
  auto e = config.emb_features;
  q_proj = register_module("q_proj", Linear(e, num_heads * head_dim, config.attention_bias, param_dtype));
  k_proj = register_module("k_proj", Linear(e, num_kv_heads * head_dim, config.attention_bias, param_dtype));
  v_proj = register_module("v_proj", Linear(e, num_kv_heads * head_dim, config.attention_bias, param_dtype));
  o_proj = register_module("o_proj", Linear(num_heads * head_dim, e, config.attention_output_bias, param_dtype));
  if (config.qk_norm) {  // over each head, or (OLMo 2) over the whole projection
    auto q_features = qk_norm_per_head ? head_dim : num_heads * head_dim, k_features = qk_norm_per_head ? head_dim : num_kv_heads * head_dim;
    q_norm = register_module("q_norm", RMSNorm(q_features, config.norm_eps, param_dtype, config.norm_weight_offset));
    k_norm = register_module("k_norm", RMSNorm(k_features, config.norm_eps, param_dtype, config.norm_weight_offset));
  }
}

at::Tensor AttentionImpl::forward(const at::Tensor& x, const AttentionCall& call) {
  auto B = x.size(0), S = x.size(1);
  auto q = q_proj->forward(x), k = k_proj->forward(x);
  if (q_norm && !qk_norm_per_head) {
    q = q_norm->forward(q);
    k = k_norm->forward(k);
  }
  q = q.view({B, S, num_heads, head_dim});
  k = k.view({B, S, num_kv_heads, head_dim});
  auto v = v_proj->forward(x).view({B, S, num_kv_heads, head_dim}).transpose(1, 2);
  if (q_norm && qk_norm_per_head) {
    q = q_norm->forward(q);
    k = k_norm->forward(k);
  }
  q = q.transpose(1, 2), k = k.transpose(1, 2);
  if (rotary_dim > 0) {
    q = rotate(q, *call.angles, rotary_dim);
    k = rotate(k, *call.angles, rotary_dim);
  }
  if (call.cache) {
    auto& cache = *call.cache;
    cache.keys[call.layer].scatter_(2, call.cache_slots, k);
    cache.values[call.layer].scatter_(2, call.cache_slots, v);
    k = cache.keys[call.layer].narrow(2, 0, cache.span);
    v = cache.values[call.layer].narrow(2, 0, cache.span);
  }
  at::Tensor out;
  if (logit_softcap > 0) {
    out = softcapped_attention(q, k, v, call.mask, call.is_causal, scale, logit_softcap);
  } else if (!call.mask.defined() && short_attention_applies(q, k, v)) {
    out = short_attention(q, k, v, call.is_causal, scale);  // training rows, prompts without a cache
  } else {
    std::optional<at::Tensor> mask;
    if (call.mask.defined()) mask = call.mask;
    // No explicit scale unless the config sets one, so the default path stays the kernel's own 1/sqrt(head_dim).
    std::optional<double> sdpa_scale;
    if (custom_scale) sdpa_scale = scale;
    out = at::scaled_dot_product_attention(q, k, v, mask, 0.0, call.is_causal && !call.mask.defined(), sdpa_scale,
                                           /*enable_gqa=*/num_kv_heads != num_heads);
  }
  return o_proj->forward(out.transpose(1, 2).reshape({B, S, num_heads * head_dim}));
}

}  // namespace dew::nn
