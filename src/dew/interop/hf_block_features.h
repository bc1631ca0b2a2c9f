#pragma once
// The decoder features only some Hugging Face families have. Exporting as a family refuses, naming the dew
// field, each feature the model uses that the family does not compute (internal to interop/).
#include <string>

#include "dew/nn/causal_transformer_config.h"

namespace dew::interop::detail {

struct BlockFeatures {
  bool layernorm = false;          // norm = layernorm (GPT-2, GPT-NeoX)
  bool learned_positions = false;  // positions = learned (GPT-2)
  bool partial_rotary = false;     // rotary_dim < head_dim (GPT-NeoX, Phi-3)
  bool parallel_residual = false;  // GPT-NeoX
  bool post_norms_only = false;    // pre_norms = false (OLMo 2)
  bool whole_projection_qk_norm = false;  // qk_norm_per_head = false (OLMo 2)
  bool multipliers = false;        // residual_multiplier, attention_scale, logits_scaling (Granite)
  bool experts = false;            // num_experts > 0 (Mixtral, Qwen2-MoE, Qwen3-MoE: hf_moe_config.h)
};

void refuse_block_features(const nn::CausalTransformerConfig& c, const std::string& model_type, const BlockFeatures& allowed);

}  // namespace dew::interop::detail
