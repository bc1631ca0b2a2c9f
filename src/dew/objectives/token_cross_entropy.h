#pragma once
// Weighted next-token cross entropy in fp32, from final hidden states and the output projection.
//
// With chunk_tokens > 0 the logits are never materialised for the whole batch: a custom autograd
// function computes them chunk by chunk in the forward pass, and with them the gradients (only those
// of inputs that require grad: a LoRA run's frozen output projection gets none), which backward scales
// by the incoming scalar. Memory holds one [chunk, vocab] block instead of [tokens, vocab] (three of
// them, with log_softmax and its gradient) -- what bounds memory for large vocabularies -- at no extra
// matmul work. Both paths give the same loss and gradients.
#include <ATen/ATen.h>

namespace dew::objectives {

struct CrossEntropySums {
  at::Tensor loss_sum;  // fp32 scalar, differentiable: sum over tokens of weight * ce
  at::Tensor correct;   // fp32 scalar, no gradient: how many tokens of nonzero weight have argmax == target;
                        // undefined unless asked for (the argmax over [N, V] costs ~10% of a small model's step)
};

// hidden [N, E] (compute dtype), output_weight [V, E] (the parameter itself), targets [N] int64,
// weights [N] fp32. softcap > 0 applies cap * tanh(logits / cap) before the softmax. count_correct
// also fills `correct`. excluded_id >= 0 gives that token no probability mass (its logit is -inf in the
// softmax and the argmax): masked diffusion's mask token, which is never a target.
CrossEntropySums token_cross_entropy(const at::Tensor& hidden, const at::Tensor& output_weight,
                                     const at::Tensor& targets, const at::Tensor& weights, double softcap,
                                     std::int64_t chunk_tokens, bool count_correct = true,
                                     std::int64_t excluded_id = -1);

}  // namespace dew::objectives
