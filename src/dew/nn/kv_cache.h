#pragma once
// Keys and values of earlier tokens, per layer, for prefill-then-decode generation. Slots are shared by
// the rows of a batch; each slot also records the token's position and segment (0 = empty or padding),
// which is what the attention mask is built from.
#include <ATen/ATen.h>

#include <vector>

#include "dew/nn/causal_transformer_config.h"

namespace dew::nn {

struct KVCache {
  std::vector<at::Tensor> keys, values;  // per layer [B, kv_heads, capacity, head_dim]
  at::Tensor positions;                  // [B, capacity] int64
  at::Tensor segments;                   // [B, capacity] int64
  std::int64_t length = 0;               // slots filled

  std::int64_t capacity() const { return positions.defined() ? positions.size(1) : 0; }

  static KVCache allocate(const CausalTransformerConfig& config, std::int64_t batch, std::int64_t capacity,
                          c10::ScalarType dtype, c10::Device device);
};

}  // namespace dew::nn
