#pragma once
// Hugging Face config.json <-> CausalTransformerConfig for the decoder families dew computes exactly:
// llama (SmolLM and other Llama-architecture models), mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, and
// the masked-diffusion LMs llada (LLaDA-8B: a Llama block, its own field spellings, hf_llada.h) and dream
// (Dream-v0-7B, spelled "Dream" in config.json: Qwen2's block), both bidirectional with a mask_token_id.
//
// The rule (the spec's): a field that changes what the model computes and that dew cannot express is
// refused by name, with its value; fields transformers itself ignores for the family are accepted. Both
// the transformers 5 spelling (rope_parameters) and the older one (rope_theta, rope_scaling,
// rope_local_base_freq, sliding_window_pattern) are read. docs/interop.md lists, per family, what is read,
// what is refused and what is ignored.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/nn/causal_transformer_config.h"

namespace dew::interop {

// The model_types config_from_hf and config_to_hf know (dew's names: "dream", not config.json's "Dream").
const std::vector<std::string>& hf_model_types();

// dew's name for a config.json model_type: the same, except Dream's "Dream" is "dream". config_from_hf and
// config_to_hf accept either spelling.
std::string hf_family_name(const std::string& model_type);

// Translates a config.json (source names it in errors). The result has dtype and param_dtype float32;
// callers choose others.
nn::CausalTransformerConfig config_from_hf(const nlohmann::ordered_json& config, const std::string& source);

// The inverse, for export as model_type: the fields the family's transformers config reads (with
// architectures and model_type). Refuses, naming the dew field, a config the family cannot express.
nlohmann::ordered_json config_to_hf(const nn::CausalTransformerConfig& config, const std::string& model_type);

// The family a native dew config exports as: for a bidirectional (masked-diffusion) config dream when its
// logits are shifted (shift_logits, Dream's alignment), else llada; for a causal one gemma3_text / gemma2 / gemma for Gemma-style
// configs, qwen3 with q/k norm, qwen2 with q/k/v biases but no output bias, mistral with one sliding window on
// every layer, else llama. config_to_hf may still refuse it (a feature no family has: e.g. q/k norm in llada).
std::string hf_model_type_for(const nn::CausalTransformerConfig& config);

}  // namespace dew::interop
