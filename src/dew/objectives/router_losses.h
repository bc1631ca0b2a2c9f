#pragma once
// The training terms of a mixture-of-experts decoder's routers (nn/mixture_of_experts.h), from the routers'
// decisions in the last forward (CausalTransformerImpl::take_router_records):
//   aux   the load-balancing loss of Switch Transformer / Mixtral, as transformers' load_balancing_loss_func
//         computes it: num_experts * sum_e f_e P_e, with f_e the fraction of token slots routed to expert e
//         and P_e its mean router probability, both pooled over every MoE layer's (unpadded) tokens;
//         experts_per_token when routing is uniform (transformers divides the slots by the tokens), more
//         when it is not.
//   z     ST-MoE's router z-loss: the mean over layers and tokens of logsumexp(router logits)^2, which keeps
//         the logits small.
//   load  [num_experts] the fraction of token slots each expert took (sums to 1; uniform is 1/num_experts).
#include <vector>

#include "dew/nn/causal_transformer.h"
#include "dew/objectives/objective.h"

namespace dew::objectives {

struct RouterLosses {
  at::Tensor aux, z;  // float32 scalars, differentiable in the logits
  at::Tensor load;    // [experts], no gradient
};

// mask [tokens] (1 = a real token, 0 = padding; the records' row order) or undefined for all tokens.
RouterLosses router_losses(const std::vector<nn::RouterRecord>& records, std::int64_t num_experts, const at::Tensor& mask);

// For an MoE model: takes its routers' records and adds (router_aux_loss_coef * aux + router_z_loss_coef * z)
// * loss.count to loss.sum (so that the trainer's division by the count adds coef * aux to the mean loss, as
// transformers adds it), and the metrics moe/aux_loss, moe/z_loss, moe/expert_load_max and
// moe/expert_load_min (weighted by loss.count). Does nothing for a dense model.
void add_router_losses(nn::CausalTransformerImpl& model, const at::Tensor& mask, Loss& loss);

}  // namespace dew::objectives
