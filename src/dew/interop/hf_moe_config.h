#pragma once
// The mixture-of-experts fields of the Hugging Face families that have them (internal to interop/), both
// ways, one line per config.json field:
//   mixtral    num_local_experts (or num_experts), num_experts_per_tok, intermediate_size (each expert's
//              width), router_aux_loss_coef; router_jitter_noise refused unless 0; top-k probabilities
//              always renormalised; no shared expert; every layer MoE.
//   qwen2_moe  num_experts, num_experts_per_tok, moe_intermediate_size, shared_expert_intermediate_size (the
//              sigmoid-gated shared expert), norm_topk_prob, decoder_sparse_step, mlp_only_layers (whose
//              dense MLP is intermediate_size wide), router_aux_loss_coef.
//   qwen3_moe  as qwen2_moe without a shared expert.
// Inert in all three: output_router_logits (whether transformers' forward returns the router logits and adds
// the aux loss; dew's training always adds it, times router_aux_loss_coef).
#include <string>

#include <nlohmann/json.hpp>

#include "dew/interop/hf_config_reader.h"

namespace dew::interop::detail {

// Whether `model_type` is one of the families above.
bool hf_moe_family(const std::string& model_type);

// Sets the experts' fields of `c` (whose mlp_features is intermediate_size) from the family's config.json.
void read_moe_fields(const HfConfigReader& r, const std::string& model_type, nn::CausalTransformerConfig& c);

// Writes the family's fields for `c`; refuses, naming the dew field, what the family cannot express.
void write_moe_fields(const nn::CausalTransformerConfig& c, const std::string& model_type, nlohmann::ordered_json& out);

// The MoE family that computes `c` (which has experts).
std::string hf_moe_model_type_for(const nn::CausalTransformerConfig& c);

}  // namespace dew::interop::detail
