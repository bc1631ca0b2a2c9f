#pragma once
// LoRA adapters as PyPI peft stores them: a directory with adapter_config.json and adapter_model.safetensors,
// tensors named base_model.model.<the base model's module>.lora_A.weight / .lora_B.weight. peft's
// PeftModel.from_pretrained(base, DIR) loads what write_peft_adapter writes onto the Hugging Face export of the
// base model and computes dew's outputs (tools/reference/check_peft_export.py checks that); read_peft_adapter
// and load_peft_adapter bring an adapter peft trained onto a dew model.
#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <string>

#include "dew/nn/causal_transformer.h"
#include "dew/nn/lora.h"

namespace dew::interop {

// Writes DIR/adapter_config.json (peft_type LORA, task_type CAUSAL_LM, r, lora_alpha, lora_dropout,
// target_modules, bias none, fan_in_fan_out, inference_mode true and the other switches dew leaves at peft's
// defaults) and DIR/adapter_model.safetensors (the adapter tensors in their stored dtype), built under a
// temporary name and renamed into place. Modules carry `family`'s own names (hf_lora_targets.h): GPT-2's
// base_model.model.transformer.h.0.attn.c_attn.lora_A.weight, target_modules ["c_attn", "c_proj"], and
// fan_in_fan_out true where the family stores Conv1D. `base_model_name_or_path` is recorded as given ("" writes
// null). Errors: a model without adapters, adapters whose rank or scale differ from `config`, and an adapter of
// dew's own on a part of a matrix the family stores fused (q_proj on GPT-2), which peft cannot express at rank r:
// the message names the fused module to train instead.
void write_peft_adapter(const nn::CausalTransformer& model, const nn::LoraConfig& config,
                        const std::string& base_model_name_or_path, const std::filesystem::path& dir,
                        const std::string& family = "llama");

struct PeftAdapter {
  nn::LoraConfig config;                       // r, lora_alpha, lora_dropout, target_modules (as written)
  std::string base_model_name_or_path;         // "" when null
  bool fan_in_fan_out = false;                 // GPT-2's Conv1D modules (load_peft_adapter checks the family)
  std::map<std::string, at::Tensor> tensors;   // CPU, under the file's names less base_model.model.
};

// Reads an adapter directory. Refuses, naming the file and field, what dew does not compute: another
// peft_type or task type, DoRA, rsLoRA, biases, per-module ranks or alphas, a layer subset, modules_to_save,
// a regular-expression target_modules, and tensors that are not LoRA A/B matrices.
PeftAdapter read_peft_adapter(const std::filesystem::path& dir);

// Reads DIR and puts its adapters on `model` (which must have none yet), whose modules the adapter names in
// `family`'s names (a fused module such as qkv_proj gets one adapter, as in peft): add_lora with the adapter's
// config, then every A and B copied in (converted to the model's dtype and device). A tensor missing, left
// over or of the wrong shape is an error naming it, as is fan_in_fan_out on a module that is not Conv1D.
// Returns the adapter's config (for a later write_peft_adapter).
nn::LoraConfig load_peft_adapter(nn::CausalTransformer& model, const std::filesystem::path& dir,
                                 const std::string& family = "llama");

}  // namespace dew::interop
