#pragma once
// GPT-2 (model_type "gpt2", GPT2LMHeadModel) and GPT-NeoX (model_type "gpt_neox", GPTNeoXForCausalLM: Pythia,
// the GPT-NeoX-20B family) config.json files both ways. Both spell their sizes their own way (n_embd, n_layer,
// ...; rotary_pct) and compute blocks the Llama table does not: GPT-2 with LayerNorm (bias), learned absolute
// positions and an ungated gelu_new MLP with biases everywhere; GPT-NeoX with LayerNorm, partial rotary
// positions (rotary_pct / partial_rotary_factor), a parallel residual and biases. The tensor layouts (GPT-2's
// Conv1D c_attn, GPT-NeoX's per-head query_key_value) are in hf_tensor_layout.h; docs/interop.md lists what
// is read, refused and inert.
#include <nlohmann/json.hpp>
#include <string>

#include "dew/nn/causal_transformer_config.h"

namespace dew::interop {

nn::CausalTransformerConfig gpt2_config_from_hf(const nlohmann::ordered_json& config, const std::string& source);
nlohmann::ordered_json gpt2_config_to_hf(const nn::CausalTransformerConfig& config);

nn::CausalTransformerConfig gpt_neox_config_from_hf(const nlohmann::ordered_json& config, const std::string& source);
nlohmann::ordered_json gpt_neox_config_to_hf(const nn::CausalTransformerConfig& config);

}  // namespace dew::interop
