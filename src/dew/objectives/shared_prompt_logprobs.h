#pragma once
// Sequence log-probabilities of a preference pair's two completions with the prompt computed once.
//
// TRL (and dew with dpo.share_prompt = false) runs prompt + chosen and prompt + rejected as two rows, so the
// prompt goes through the model twice, in the policy's forward and backward and in the reference's forward.
// Here each pair is one row [prompt | chosen | rejected]: the rejected tokens attend to the prompt and to
// themselves, never to the chosen ones, and take the positions right after the prompt, exactly as in a row
// of their own; the last prompt token's hidden state scores the first token of both completions. Causal
// attention makes the prompt's states the same in both rows, so the log-probabilities are the two-row ones
// (to rounding: the attention sums the same terms over a different layout), for a fraction of the FLOPs:
// on short completions after a long chat-template prompt nearly half (the post-training bench's pairs:
// 106 ids as two rows, about 63 as one). Prefix sharing for DPO: Wang et al. 2024, arXiv:2410.20305.
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

// nullopt when a pair's two rows do not start with the same prompt ids, or the shared row would be longer
// than the model's max_seq_len (then the caller scores the two rows as they are). chunk_tokens as in
// target_logprobs.
std::optional<PairLogprobs> shared_prompt_logprobs(nn::CausalTransformer& model, const PairRows& rows, std::int64_t chunk_tokens);

}  // namespace dew::objectives
