#pragma once
// Log-probabilities of several completions of one prompt with the prompt computed once.
//
// TRL (and dew with dpo.share_prompt / grpo.share_prompt = false) runs prompt + completion as one row per
// completion, so a prompt goes through the model once per completion: twice per DPO pair, group_size times
// per GRPO group, in the policy's forward and backward and in the reference's forward. Here each group is one
// row [prompt | completion 1 | completion 2 | ...]: a completion's tokens attend to the prompt and to
// themselves, never to the other completions, and take the positions right after the prompt, exactly as in a
// row of their own; the last prompt token's state scores the first token of every completion. Causal
// attention makes the prompt's states the same in every row, so the log-probabilities are the one-row-each
// ones (to rounding: the attention sums the same terms in another layout), for a fraction of the FLOPs: the
// post-training bench's DPO pairs take about 63 ids as one row instead of 106 as two. Prefix sharing for
// preference tuning: Wang et al. 2024, arXiv:2410.20305.
#include <cstdint>
#include <optional>

#include <ATen/ATen.h>

#include "dew/nn/causal_transformer.h"

namespace dew::objectives {

// The rows of a preference batch (data/preference_rows.h): ids [B, L], segment ids [B, L] (1 real, 0 pad),
// completion-target masks [B, L - 1] (1 where id t + 1 is a completion id), one per side.
struct PairRows {
  at::Tensor chosen, rejected, chosen_segments, rejected_segments, chosen_mask, rejected_mask;
};

struct PairLogprobs {
  at::Tensor chosen, rejected;  // fp32 [B], differentiable: sums over each completion's tokens
};

// DPO: each pair's two completions after its prompt. chunk_tokens as in target_logprobs.
std::optional<PairLogprobs> shared_prompt_logprobs(nn::CausalTransformer& model, const PairRows& rows, std::int64_t chunk_tokens);

// GRPO: ids [R, T] (prompt + completion, right-padded), mask [R, T - 1] (1 where the target is a completion
// token), R = groups x group_size with each group's rows consecutive and sharing their prompt. Returns
// [R, T - 1] fp32 like token_logprobs, with the completion targets' entries filled and 0 elsewhere (callers
// read them through the mask).
std::optional<at::Tensor> shared_prompt_token_logprobs(nn::CausalTransformer& model, const at::Tensor& ids, const at::Tensor& mask,
                                                       std::int64_t group_size, std::int64_t chunk_tokens, double temperature);

// Both decline (nullopt) when the rows of a group do not start with the same prompt ids, a prompt is empty,
// a completion has no token, the shared row would exceed the model's max_seq_len, or its attention mask
// would pass 64 M entries (groups x width^2); the caller then scores the rows as they are.

}  // namespace dew::objectives
