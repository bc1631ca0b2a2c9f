#pragma once
// Per-token log-probabilities of a sequence under a causal model, in fp32 and differentiable: what DPO
// (sequence log-probabilities of chosen and rejected completions) and GRPO (per-token policy, behaviour and
// reference log-probabilities) are built on.
//
// With chunk_tokens > 0 a custom autograd function computes the logits chunk by chunk in the forward pass,
// so memory holds one [chunk, vocab] block instead of [tokens, vocab]. With a frozen output projection
// (LoRA, reference passes) the forward pass also computes the hidden states' gradient rows, and backward
// only scales them; a trainable projection has its logits recomputed in backward. Both paths give the
// same values and gradients.
#include <cstdint>

#include <ATen/ATen.h>

#include "dew/nn/causal_transformer.h"

namespace dew::objectives {

// log p(targets[n] | hidden[n]) for hidden [N, E] (compute dtype), output_weight [V, E] (the parameter
// itself), targets [N] int64 -> fp32 [N]. The logits are soft-capped (softcap > 0: cap * tanh(z / cap)) and
// then divided by temperature, as sampling does, so GRPO's ratios compare the distribution it sampled from.
at::Tensor target_logprobs(const at::Tensor& hidden, const at::Tensor& output_weight, const at::Tensor& targets,
                           double softcap, double temperature, std::int64_t chunk_tokens);

// ids [B, T] int64 -> fp32 [B, T - 1]: entry [b, t] is log p(ids[b, t + 1] | ids[b, 0..t]). positions and
// segment_ids ([B, T] int64) may be undefined (defaults: 0..T-1, one segment); the model reads the first
// T - 1 columns of each. Entries whose target is padding or a prompt token are computed all the same: the
// caller masks them (sequence_logprobs, or a completion mask in a token loss).
at::Tensor token_logprobs(nn::CausalTransformer& model, const at::Tensor& ids, const at::Tensor& positions,
                          const at::Tensor& segment_ids, std::int64_t chunk_tokens, double temperature = 1.0);

// Sum over t of token_logprobs[b, t] * mask[b, t] -> [B] (fp32, differentiable): a completion's
// log-probability when mask [B, T - 1] marks the positions whose target is a completion token.
at::Tensor sequence_logprobs(const at::Tensor& token_logprobs, const at::Tensor& mask);

}  // namespace dew::objectives
