#pragma once
// Keys and values of earlier tokens, per layer, for prefill-then-decode generation. Each slot also records
// the token's position and segment (0 = empty or padding), which is what the attention mask is built from.
//
// Slots by position (the step engine, inference/engine.h): row b's slot j holds its token at position j.
// A call writes each token into the slot its position names (so a call with a cache passes its positions),
// rows of different lengths decode together, each at its own length, and the call attends over slots
// [0, span), span set by the caller. Slots past a row's own length hold nothing it may see: causality
// (key slot <= query position) hides them.
#include <ATen/ATen.h>

#include <vector>

#include "dew/nn/causal_transformer_config.h"

namespace dew::nn {

struct KVCache {
  std::vector<at::Tensor> keys, values;  // per layer [B, kv_heads, capacity, head_dim]
  at::Tensor positions;                  // [B, capacity] int64
  at::Tensor segments;                   // [B, capacity] int64
  std::int64_t span = 0;                 // 1 + the largest position of the next call, set by the caller

  std::int64_t capacity() const { return positions.defined() ? positions.size(1) : 0; }

  static KVCache allocate(const CausalTransformerConfig& config, std::int64_t batch, std::int64_t capacity,
                          c10::ScalarType dtype, c10::Device device);
  // Rows [first, first + count) of this cache as a cache of their own: views that share its storage, so
  // writes through the view land in this cache (the engine's decode batch and per-request prefill).
  KVCache rows(std::int64_t first, std::int64_t count) const;
};

}  // namespace dew::nn
