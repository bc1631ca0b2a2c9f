#pragma once
// The attention calls of one decoder forward pass (causal_transformer.h): what the layers share is made once
// -- the positions, the cache slots the call writes, one mask per distinct window and one set of rotary
// angles per distinct base -- and each layer gets its AttentionCall from here.
//
// Masks: none at all on the plain path (no cache, no segments, no explicit mask): full layers there attend
// by SDPA's causal flag, or to everything when the model is bidirectional. Sliding-window layers get their
// window's mask, intersected with the caller's explicit mask when there is one.
#include <cstdint>
#include <map>

#include "dew/nn/attention.h"
#include "dew/nn/attention_mask.h"
#include "dew/nn/causal_transformer_config.h"
#include "dew/nn/rotary.h"

namespace dew::nn {

struct DecoderInputs;

// Refuses a malformed call by what is wrong: ids not [batch, seq]; a cache without positions or with a
// span outside its capacity; an explicit mask with a cache or segments, or of the wrong type or shape; a
// sequence longer than max_seq_len without a cache.
void check_decoder_call(const DecoderInputs& in, const CausalTransformerConfig& config);

class DecoderLayerCalls {
 public:
  // With a cache, records the call's positions and segments in the slots its positions name.
  DecoderLayerCalls(const CausalTransformerConfig& config, const DecoderInputs& in, c10::ScalarType compute_dtype);

  AttentionCall call(std::int64_t layer);

 private:
  const RotaryAngles* angles_for(std::int64_t layer);
  const at::Tensor& mask_for(std::int64_t window);

  const CausalTransformerConfig& config_;
  const DecoderInputs& in_;
  c10::ScalarType compute_dtype_;
  std::int64_t batch_, length_;
  at::TensorOptions longs_;
  at::Tensor positions_;
  bool plain_;              // no cache, no segments
  MaskInputs mask_inputs_;  // undefined query_positions until a mask needs them on the plain path
  at::Tensor cache_slots_;
  std::map<std::int64_t, at::Tensor> masks_;       // by window
  std::map<double, RotaryAngles> angles_by_theta_;  // by rotary base
};

}  // namespace dew::nn
