#pragma once
// Grouped-query self-attention with rotary positions and optional per-head q/k RMSNorm (Qwen3). Float32 rows
// of up to 256 tokens on the CPU without a cache or mask (training, prompts) go through dew's short-sequence
// kernel (short_attention.h); the rest through ATen's scaled_dot_product_attention, which picks flash or
// memory-efficient kernels where they apply.
// Soft-capped scores (Gemma 2) have no fused kernel: that path computes the scores explicitly, as
// transformers' eager attention does (softmax in fp32).
#include "dew/nn/kv_cache.h"
#include "dew/nn/layers.h"
#include "dew/nn/rotary.h"

namespace dew::nn {

struct AttentionCall {
  const RotaryAngles* angles = nullptr;  // null for a model with learned positions
  at::Tensor mask;         // bool [B, 1, S, L]; undefined with is_causal (the fast path)
  bool is_causal = false;  // no mask: plain causal over the S queries themselves
  KVCache* cache = nullptr;
  std::int64_t layer = 0;
  // With a cache: the slot of each of the call's keys and values (kv_cache.h),
  // [B, kv_heads, S, head_dim] int64 (an expanded view of the positions), for scatter_.
  at::Tensor cache_slots;
};

class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(const CausalTransformerConfig& config, c10::ScalarType param_dtype);
  at::Tensor forward(const at::Tensor& x, const AttentionCall& call);

  std::int64_t num_heads, num_kv_heads, head_dim;
  std::int64_t rotary_dim;  // 0: no rotary positions (learned ones); < head_dim: partial rotary
  bool qk_norm_per_head;
  double scale, logit_softcap;  // scale: query_pre_attn_scalar^-0.5, else head_dim^-0.5
  bool custom_scale;
  Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  RMSNorm q_norm{nullptr}, k_norm{nullptr};
};
TORCH_MODULE(Attention);

}  // namespace dew::nn
