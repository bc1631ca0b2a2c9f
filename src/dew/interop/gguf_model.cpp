#include "dew/interop/gguf_model.h"

#include <chrono>

#include "dew/core/error.h"
#include "dew/nn/dtype.h"

namespace dew::interop {
namespace {

bool supported_architecture(const std::string& arch) { return arch == "llama" || arch == "qwen2" || arch == "qwen3"; }

std::string architecture_of(const formats::GgufFile& file) {
  std::string arch = file.at("general.architecture").as_string();
  if (!supported_architecture(arch))
    dew::fail(file.name(), ": metadata 'general.architecture' is \"", arch,
              "\"; dew loads llama, qwen2 and qwen3 GGUF decoders");
  return arch;
}

// An ARCH.* integer that must be positive.
std::int64_t positive(const formats::GgufFile& file, const std::string& key) {
  std::int64_t value = file.at(key).as_int();
  if (value <= 0) dew::fail(file.name(), ": metadata '", key, "' is ", value, "; it must be positive");
  return value;
}

}  // namespace

nn::CausalTransformerConfig gguf_model_config(const formats::GgufFile& file, c10::ScalarType dtype) {
  const std::string arch = architecture_of(file);
  auto key = [&](const char* suffix) { return arch + "." + suffix; };
  nn::CausalTransformerConfig config;
  config.emb_features = positive(file, key("embedding_length"));
  config.num_layers = positive(file, key("block_count"));
  config.mlp_features = positive(file, key("feed_forward_length"));
  config.num_heads = positive(file, key("attention.head_count"));
  config.num_kv_heads = file.find(key("attention.head_count_kv")) ? positive(file, key("attention.head_count_kv"))
                                                                  : config.num_heads;
  config.head_dim = file.find(key("attention.key_length")) ? positive(file, key("attention.key_length"))
                                                           : config.emb_features / config.num_heads;
  if (const auto* value_length = file.find(key("attention.value_length"));
      value_length && value_length->as_int() != config.head_dim)
    dew::fail(file.name(), ": metadata '", key("attention.value_length"), "' is ", value_length->as_int(),
              " but the key length (head_dim) is ", config.head_dim, "; dew needs them equal");
  if (const auto* rope_dims = file.find(key("rope.dimension_count")); rope_dims && rope_dims->as_int() != config.head_dim)
    dew::fail(file.name(), ": metadata '", key("rope.dimension_count"), "' is ", rope_dims->as_int(),
              " but head_dim is ", config.head_dim, "; rotary positions over part of a head are not supported");
  if (const auto* scaling = file.find(key("rope.scaling.type")); scaling && scaling->as_string() != "none")
    dew::fail(file.name(), ": metadata '", key("rope.scaling.type"), "' is \"", scaling->as_string(),
              "\"; rotary scaling is not supported for GGUF models");
  if (const auto* experts = file.find(key("expert_count")); experts && experts->as_int() > 0)
    dew::fail(file.name(), ": metadata '", key("expert_count"), "' is ", experts->as_int(),
              "; mixture-of-experts models are not supported");
  config.max_seq_len = positive(file, key("context_length"));
  config.rope_theta = file.find(key("rope.freq_base")) ? file.at(key("rope.freq_base")).as_float() : 10000.0;
  config.norm_eps = file.at(key("attention.layer_norm_rms_epsilon")).as_float();
  config.vocab_size = static_cast<std::int64_t>(file.at("tokenizer.ggml.tokens").as_array().size());
  config.mlp = "swiglu";
  config.qk_norm = arch == "qwen3";
  // Qwen 2 always has q/k/v biases; a llama file has them (and an o_proj bias) only when it stores them.
  config.attention_bias = arch == "qwen2" || file.find_tensor("blk.0.attn_q.bias") != nullptr;
  config.attention_output_bias = file.find_tensor("blk.0.attn_output.bias") != nullptr;
  config.tie_embeddings = file.find_tensor("output.weight") == nullptr;
  config.dtype = config.param_dtype = nn::dtype_name(dtype);
  config.validate();
  return config;
}

namespace {

GgufModel load(const std::filesystem::path& path, c10::ScalarType dtype, bool keep_quantized) {
  formats::GgufFile file(path);
  GgufModel out;
  out.architecture = architecture_of(file);
  out.tokenizer = gguf_file_tokenizer(file);
  out.model = nn::CausalTransformer(gguf_model_config(file, dtype), nn::ParameterInit::none);
  load_gguf_weights(*out.model, file, out.architecture, keep_quantized);
  out.model->eval();
  return out;
}

}  // namespace

GgufModel load_gguf_model(const std::filesystem::path& path, c10::ScalarType dtype) { return load(path, dtype, false); }

GgufModel load_gguf_model(const std::filesystem::path& path, nn::WeightFormat weights) {
  GgufModel out = load(path, c10::ScalarType::Float, weights == nn::WeightFormat::native);
  if (weights == nn::WeightFormat::bfloat16) nn::quantize_matrices(*out.model, formats::GgmlType::BF16);
  return out;
}

}  // namespace dew::interop
