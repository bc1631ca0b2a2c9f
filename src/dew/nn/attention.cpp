#include "dew/nn/attention.h"

namespace dew::nn {

AttentionImpl::AttentionImpl(const CausalTransformerConfig& config, c10::ScalarType param_dtype)
    : num_heads(config.num_heads), num_kv_heads(config.resolved_kv_heads()), head_dim(config.resolved_head_dim()) {
  auto e = config.emb_features;
  q_proj = register_module("q_proj", Linear(e, num_heads * head_dim, config.attention_bias, param_dtype));
  k_proj = register_module("k_proj", Linear(e, num_kv_heads * head_dim, config.attention_bias, param_dtype));
  v_proj = register_module("v_proj", Linear(e, num_kv_heads * head_dim, config.attention_bias, param_dtype));
  o_proj = register_module("o_proj", Linear(num_heads * head_dim, e, false, param_dtype));
  if (config.qk_norm) {
    q_norm = register_module("q_norm", RMSNorm(head_dim, config.norm_eps, param_dtype));
    k_norm = register_module("k_norm", RMSNorm(head_dim, config.norm_eps, param_dtype));
  }
}

at::Tensor AttentionImpl::forward(const at::Tensor& x, const AttentionCall& call) {
  auto B = x.size(0), S = x.size(1);
  auto q = q_proj->forward(x).view({B, S, num_heads, head_dim});
  auto k = k_proj->forward(x).view({B, S, num_kv_heads, head_dim});
  auto v = v_proj->forward(x).view({B, S, num_kv_heads, head_dim}).transpose(1, 2);
  if (q_norm) {
    q = q_norm->forward(q);
    k = k_norm->forward(k);
  }
  q = apply_rotary(q.transpose(1, 2), *call.angles);
  k = apply_rotary(k.transpose(1, 2), *call.angles);
  if (call.cache) {
    auto& cache = *call.cache;
    auto start = cache.length;
    cache.keys[call.layer].narrow(2, start, S).copy_(k);
    cache.values[call.layer].narrow(2, start, S).copy_(v);
    k = cache.keys[call.layer].narrow(2, 0, start + S);
    v = cache.values[call.layer].narrow(2, 0, start + S);
  }
  std::optional<at::Tensor> mask;
  if (call.mask.defined()) mask = call.mask;
  auto out = at::scaled_dot_product_attention(q, k, v, mask, 0.0, call.is_causal && !call.mask.defined(), std::nullopt,
                                              /*enable_gqa=*/num_kv_heads != num_heads);
  return o_proj->forward(out.transpose(1, 2).reshape({B, S, num_heads * head_dim}));
}

}  // namespace dew::nn
