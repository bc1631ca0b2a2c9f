#include "dew/nn/attention_mask.h"

namespace dew::nn {

at::Tensor attention_mask(const MaskInputs& in, std::int64_t window) {
  auto S = in.query_positions.size(1), L = in.key_positions.size(1);
  auto longs = at::TensorOptions().dtype(at::kLong).device(in.query_positions.device());
  auto query_slot = in.query_slots.defined() ? in.query_slots.unsqueeze(2)
                                             : (at::arange(S, longs) + in.first_query_slot).view({1, S, 1});
  auto key_slot = at::arange(L, longs).view({1, 1, L});
  auto allowed = (in.query_segments.unsqueeze(2) == in.key_segments.unsqueeze(1)) & (in.key_segments.unsqueeze(1) != 0);
  if (in.causal) allowed = allowed & (key_slot <= query_slot);
  if (window > 0) {
    auto distance = (in.query_positions.unsqueeze(2) - in.key_positions.unsqueeze(1)).abs();
    allowed = allowed & (distance < window);
  }
  allowed = allowed | (key_slot == query_slot);
  return allowed.unsqueeze(1);
}

}  // namespace dew::nn
