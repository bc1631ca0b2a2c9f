#pragma once
// Loading and exporting Hugging Face decoder checkpoints (config.json + safetensors weights) for the
// families hf_config.h translates. dew's parameters carry Hugging Face's names, so the weight map is 1:1
// (LLaDA's OLMo-style names are mapped both ways, hf_llada.h); what the loader adds is checking: every tensor the model needs is present with the config's shape, no
// tensor is left over, and a tied checkpoint's lm_head.weight (Qwen3-0.6B ships one) equals the embedding.
#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "dew/nn/causal_transformer.h"

namespace dew::interop {

struct HfModel {
  nn::CausalTransformer model{nullptr};
  std::string model_type;            // dew's family name (hf_family_name: "dream" for config.json's "Dream")
  nlohmann::ordered_json hf_config;  // config.json as read
};

// Reads DIR/config.json and DIR/model.safetensors (or the shards of model.safetensors.index.json).
// Parameters are stored, and computed, in `dtype` (float32, bfloat16 or float16). Errors (dew::Error)
// name the file and the field or tensor: an untranslatable config field, a missing tensor, a tensor the
// model does not have, a shape that disagrees with the config, a tied lm_head.weight that differs from
// model.embed_tokens.weight. Ignored: rotary_emb.inv_freq buffers older checkpoints carry. An fp8 checkpoint
// (quantization_config quant_method fp8, hf_quantization.h) is dequantized to `dtype` here: the model holds
// plain weights, so save_hf_model writes it back unquantized; other quantization methods are refused.
HfModel load_hf_model(const std::filesystem::path& dir, c10::ScalarType dtype = at::kFloat);

struct HfExportOptions {
  std::optional<std::int64_t> bos_token_id, eos_token_id, pad_token_id;  // config.json and generation_config.json
  // Larger weights go to model-0000K-of-0000N.safetensors shards and model.safetensors.index.json.
  std::int64_t max_shard_bytes = 5'000'000'000;
};

// Writes DIR/config.json (config_to_hf of model_type, with torch_dtype = the parameters' dtype),
// DIR/model.safetensors, or shards and their index beyond max_shard_bytes (parameters under the family's
// names, LLaDA's for llada, in their stored dtype; no head when tied) and DIR/generation_config.json. The directory is built under a temporary sibling name and
// renamed into place when complete, so an interrupted export leaves no half directory (and an existing DIR
// is replaced only then). Refuses, before writing anything, a config the family cannot express.
void save_hf_model(const nn::CausalTransformer& model, const std::string& model_type, const std::filesystem::path& dir,
                   const HfExportOptions& options = {});

}  // namespace dew::interop
