#include "dew/nn/decoder_layer_calls.h"

#include "dew/core/error.h"
#include "dew/nn/causal_transformer.h"

namespace dew::nn {

void check_decoder_call(const DecoderInputs& in, const CausalTransformerConfig& config) {
  if (!in.ids.defined() || in.ids.dim() != 2) dew::fail("decoder input ids must be a [batch, seq] tensor");
  const auto B = in.ids.size(0), S = in.ids.size(1);
  if (in.cache) {
    // The caller knows each row's length; the positions name the slots, so they are required.
    if (!in.positions.defined()) dew::fail("a KV cache with slots by position needs the call's positions");
    if (in.cache->span < 1 || in.cache->span > in.cache->capacity()) {
      dew::fail("the KV cache holds ", in.cache->capacity(), " tokens per row; the call attends over ", in.cache->span);
    }
  }
  if (in.attention_mask.defined()) {
    if (in.cache || in.segment_ids.defined()) dew::fail("a decoder call takes an explicit attention mask only without a KV cache or segment ids");
    if (in.attention_mask.scalar_type() != at::kBool || in.attention_mask.sizes() != at::IntArrayRef{B, 1, S, S}) {
      dew::fail("the explicit attention mask must be bool [", B, ", 1, ", S, ", ", S, "], got ", in.attention_mask.scalar_type(), " ",
                in.attention_mask.sizes());
    }
  }
  if (in.rope_lengths.defined() && (in.rope_lengths.scalar_type() != at::kLong || in.rope_lengths.sizes() != at::IntArrayRef{B})) {
    dew::fail("the decoder call's rope_lengths must be int64 [", B, "], got ", in.rope_lengths.scalar_type(), " ", in.rope_lengths.sizes());
  }
  if (!in.cache && S > config.max_seq_len) {
    dew::fail("the sequence has ", S, " tokens but the model's max_seq_len is ", config.max_seq_len);
  }
}

DecoderLayerCalls::DecoderLayerCalls(const CausalTransformerConfig& config, const DecoderInputs& in, c10::ScalarType compute_dtype)
    : config_(config),
      in_(in),
      compute_dtype_(compute_dtype),
      batch_(in.ids.size(0)),
      length_(in.ids.size(1)),
      longs_(at::TensorOptions().dtype(at::kLong).device(in.ids.device())),
      plain_(!in.cache && !in.segment_ids.defined()) {
  const auto B = batch_, S = length_;
  positions_ = in.positions.defined() ? in.positions : at::arange(S, longs_).unsqueeze(0).expand({B, S});
  if (in.cache) {
    auto& cache = *in.cache;
    auto segments = in.segment_ids.defined() ? in.segment_ids : at::ones({B, S}, longs_);
    cache.positions.scatter_(1, positions_, positions_);
    cache.segments.scatter_(1, positions_, segments);
    mask_inputs_ = {positions_, segments, cache.positions.narrow(1, 0, cache.span), cache.segments.narrow(1, 0, cache.span),
                    0, config.causal};
    mask_inputs_.query_slots = positions_;
    cache_slots_ = positions_.view({B, 1, S, 1}).expand({B, config.resolved_kv_heads(), S, config.resolved_head_dim()});
  } else if (!plain_) {
    auto segments = in.segment_ids.defined() ? in.segment_ids : at::ones({B, S}, longs_);
    mask_inputs_ = {positions_, segments, positions_, segments, 0, config.causal};
  }
}

AttentionCall DecoderLayerCalls::call(std::int64_t layer) {
  const auto window = config_.window_of_layer(layer);
  AttentionCall call{angles_for(layer), {}, false, in_.cache, layer, cache_slots_};
  if (in_.attention_mask.defined()) {
    call.mask = window == 0 ? in_.attention_mask : mask_for(window);
  } else if (plain_ && window == 0) {
    call.is_causal = config_.causal;
  } else {
    call.mask = mask_for(window);
  }
  return call;
}

const RotaryAngles* DecoderLayerCalls::angles_for(std::int64_t layer) {
  if (config_.positions != "rotary") return nullptr;  // learned positions: added to the embeddings instead
  // The model's base (with its scaling), and any layer kind's own; over the rotating features only.
  const auto dims = config_.resolved_rotary_dim();
  const double theta = config_.kind_rope_theta_of_layer(layer);
  auto it = angles_by_theta_.find(theta);
  if (it == angles_by_theta_.end()) {
    const auto device = in_.ids.device();
    if (theta == 0 && config_.rope_scaling.type == "longrope") {
      auto lengths = in_.rope_lengths.defined() ? in_.rope_lengths : positions_.amax(1) + 1;
      return &angles_by_theta_.emplace(theta, longrope_angles(positions_, lengths, dims, config_.rope_theta, config_.rope_scaling, compute_dtype_))
                  .first->second;
    }
    auto inv_freq = theta > 0 ? rotary_inv_freq(dims, theta, RopeScaling{}, device)
                              : rotary_inv_freq(dims, config_.rope_theta, config_.rope_scaling, device);
    it = angles_by_theta_.emplace(theta, rotary_angles(positions_, inv_freq, compute_dtype_)).first;
  }
  return &it->second;
}

const at::Tensor& DecoderLayerCalls::mask_for(std::int64_t window) {
  auto it = masks_.find(window);
  if (it != masks_.end()) return it->second;
  if (in_.attention_mask.defined()) {
    // The window's own mask over one segment, intersected with the caller's.
    auto ones = at::ones({batch_, length_}, longs_);
    return masks_.emplace(window, attention_mask(MaskInputs{positions_, ones, positions_, ones, 0, false}, window) & in_.attention_mask)
        .first->second;
  }
  if (plain_ && !mask_inputs_.query_positions.defined()) {
    auto ones = at::ones({batch_, length_}, longs_);
    mask_inputs_ = {positions_, ones, positions_, ones, 0, config_.causal};
  }
  return masks_.emplace(window, attention_mask(mask_inputs_, window)).first->second;
}

}  // namespace dew::nn
