#pragma once
// What GRPO asks of a decoder: n sampled continuations of each prompt. The objective does not decode
// itself (decoding lives in inference/, a layer above objectives); the run kind hands it a
// RolloutFunction, in dew runs/kinds/grpo_kind: the decoding engine's generate().
#include <cstdint>
#include <functional>
#include <vector>

#include "dew/nn/causal_transformer.h"

namespace dew::objectives {

// The sampling settings of one rollout pass. temperature 0 is greedy (evaluation).
struct RolloutRequest {
  double temperature = 1.0;
  double top_p = 1.0;
  std::int64_t max_new_tokens = 64;
  std::int64_t n = 1;                 // continuations per prompt
  std::vector<std::int64_t> eos_ids;  // a continuation ends after one of these
  std::uint64_t seed = 0;             // same seed, prompts and weights: same continuations
};

// Continuation r belongs to prompt r / n; its tokens end with the EOS when it stopped at one.
struct Rollouts {
  std::int64_t n = 1;
  std::vector<std::vector<std::int32_t>> tokens;
  std::vector<bool> stopped_at_eos;

  std::int64_t rows() const { return static_cast<std::int64_t>(tokens.size()); }
  std::int64_t prompt_of(std::int64_t row) const { return row / n; }
};

using RolloutFunction =
    std::function<Rollouts(nn::CausalTransformer& policy, const std::vector<std::vector<std::int32_t>>& prompts,
                           const RolloutRequest& request)>;

}  // namespace dew::objectives
