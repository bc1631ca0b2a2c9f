#pragma once
// LLaDA checkpoints (GSAI-ML/LLaDA-8B-Base and -Instruct, model_type "llada", architectures ["LLaDAModelLM"]):
// the config.json spelling (OLMo's: d_model, n_layers, n_heads, ...) and the tensor names (OLMo's module tree
// under model.transformer.) both ways. What the release's modeling_llada.py computes with block_type "llama" is
// a Llama decoder with bidirectional attention: pre-norm RMSNorm, rotate-half rope, SwiGLU, no biases. dew's
// parameters carry Llama's names, so LLaDA is a config translation plus a tensor-name map. hf_config.h and
// hf_model.h dispatch here; docs/interop.md lists what is read, refused and ignored.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "dew/nn/causal_transformer_config.h"

namespace dew::interop {

// config.json (model_type "llada") -> a bidirectional CausalTransformerConfig with its mask_token_id. A
// missing field takes LLaDAConfig's default (OLMo's ModelConfig: rope false, block_type sequential,
// layer_norm_type default, weight_tying true, rope_theta 10000, ...), so a field LLaDA-8B sets but a config
// leaves out is refused by name when that default is not a model dew computes.
nn::CausalTransformerConfig llada_config_from_hf(const nlohmann::ordered_json& config, const std::string& source);

// The inverse: LLaDA-8B's field set at this model's sizes. Refuses, naming the dew field, a config LLaDA's
// llama block cannot express (causal, no mask id, biases, q/k norm, sliding windows, rope scaling, ...).
nlohmann::ordered_json llada_config_to_hf(const nn::CausalTransformerConfig& config);

// dew's (Llama's) parameter name -> LLaDA's: model.embed_tokens.weight -> model.transformer.wte.weight,
// model.layers.N.mlp.down_proj.weight -> model.transformer.blocks.N.ff_out.weight, lm_head.weight ->
// model.transformer.ff_out.weight, ...
std::string llada_tensor_name(const std::string& dew_name);
// The inverse; nullopt for a name LLaDA's llama block does not have (wpe, att_proj, block_groups, ...).
std::optional<std::string> dew_tensor_name_from_llada(const std::string& llada_name);

}  // namespace dew::interop
