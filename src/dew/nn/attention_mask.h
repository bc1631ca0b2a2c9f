#pragma once
// Which keys each query may attend to, as one boolean mask for scaled_dot_product_attention.
//
// Query i sits in slot first_query_slot + i (or, with query_slots, in the slot given per row: caches whose
// rows have different lengths); key j in slot j. A query attends to key j when
//   causal:   j <= its own slot (slots, not positions: packed rows restart positions per document)
//   segments: same segment id, and the key's segment is not 0 (padding or an empty cache slot)
//   window:   |query position - key position| < window, when window > 0
// and always to itself, so that padding rows stay finite instead of becoming NaN.
#include <ATen/ATen.h>

namespace dew::nn {

struct MaskInputs {
  at::Tensor query_positions, query_segments;  // [B, S]
  at::Tensor key_positions, key_segments;      // [B, L]
  std::int64_t first_query_slot = 0;
  bool causal = true;
  at::Tensor query_slots;  // [B, S] int64, optional: each query's own slot, replacing first_query_slot + i
};

at::Tensor attention_mask(const MaskInputs& inputs, std::int64_t window);  // bool [B, 1, S, L]

}  // namespace dew::nn
