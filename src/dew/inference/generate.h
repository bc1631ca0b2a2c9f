#pragma once
// Batched generation: every prompt's continuations run to the end together, through the step engine
// (inference/engine.h), which is the one decoding path of generate, `dew chat`, GRPO rollouts and serving.
//
// Each row is an engine request with its own cache row and its own random stream (seed + row), so a
// prompt gives the same continuation alone as in any batch (up to float rounding of batched matmuls).
#include <cstdint>
#include <vector>

#include "dew/inference/sampling.h"
#include "dew/nn/causal_transformer.h"

namespace dew::inference {

// One row per continuation: rows = prompts * n, prompt i's continuations at rows i*n .. i*n + n-1.
struct Generation {
  std::int64_t n = 1;                            // continuations per prompt
  std::vector<std::vector<std::int32_t>> tokens;  // new tokens per row; the EOS, when reached, is the last
  std::vector<std::int64_t> lengths;             // tokens[row].size()
  std::vector<bool> stopped_at_eos;              // false: the row reached max_new_tokens
  // log p(token) of each chosen token under the model's own distribution: log_softmax of the raw fp32
  // logits (temperature 1, no penalty or filter), which is the policy log-probability GRPO needs; not the
  // probability under the processed distribution the token was drawn from.
  std::vector<std::vector<float>> logprobs;

  std::int64_t rows() const { return static_cast<std::int64_t>(tokens.size()); }
  std::int64_t prompt_of(std::int64_t row) const { return row / n; }
};

// Generates sampling.n continuations of every prompt. Runs without gradients, on the model's device,
// with the model in eval mode (its train/eval mode is restored afterwards). Errors (dew::Error): no
// prompts, an empty prompt, a token id outside the vocabulary, invalid sampling settings, a prompt
// whose length plus max_new_tokens exceeds the model's max_seq_len (both numbers are named), more rows
// than the machine's memory holds (estimated before allocating on CPU; the allocator's report on GPU),
// or non-finite logits from the model (NaN/Inf weights), named by step.
// The request checks generate() makes (and masked_generate): valid sampling settings, prompts present, non
// empty and inside the vocabulary, room for max_new_tokens after the longest, EOS ids in the vocabulary.
void check_generation_request(const nn::CausalTransformerConfig& config, const std::vector<std::vector<std::int32_t>>& prompts,
                              const Sampling& sampling);

Generation generate(nn::CausalTransformer& model, const std::vector<std::vector<std::int32_t>>& prompts,
                    const Sampling& sampling);

}  // namespace dew::inference
