#pragma once
// LoRA targets in a Hugging Face family's own module names, from the family's tensor layout
// (hf_tensor_layout.h): what lets lora.modules and a peft adapter directory say c_attn, query_key_value,
// qkv_proj, gate_up_proj, attn.c_proj or dense where dew's modules are q_proj, ..., down_proj. A fused matrix
// is one adapter whose B rows go to the parts by the layout the weight split uses (nn/lora.h, LoraTargetName).
#include <map>
#include <string>

#include "dew/nn/causal_transformer.h"
#include "dew/nn/lora.h"

namespace dew::interop {

// One stored module of a decoder layer made of dew projections, under its path below the layer
// (attn.c_attn, self_attn.o_proj), for nn::add_lora's `names`. Llama's families give dew's own names.
// `family` is dew's family name or config.json's model_type.
nn::LoraTargetNames hf_lora_target_names(const std::string& family, const nn::CausalTransformer& model);

// Where the family's checkpoint keeps each module an adapter can sit on: dew's module path (an adapter's
// parent, model.layers.0.self_attn.o_proj; a fused adapter's model.layers.0.self_attn.c_attn) -> the family's
// (transformer.h.0.attn.c_proj, transformer.h.0.attn.c_attn).
std::map<std::string, std::string> hf_lora_module_paths(const std::string& family, const nn::CausalTransformer& model);

// Whether the family stores this module (a key of hf_lora_module_paths) as GPT-2's Conv1D ([in, out]), where
// peft's adapter_config says fan_in_fan_out: true.
bool hf_lora_module_is_conv1d(const std::string& family, const nn::CausalTransformer& model, const std::string& dew_module);

}  // namespace dew::interop
