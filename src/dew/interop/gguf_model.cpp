#include "dew/interop/gguf_model.h"

#include <chrono>

#include "dew/core/error.h"
#include "dew/interop/gguf_architecture.h"
#include "dew/nn/dtype.h"

namespace dew::interop {
namespace {

// An ARCH.* integer that must be positive.
std::int64_t positive(const formats::GgufFile& file, const std::string& key) {
  std::int64_t value = file.at(key).as_int();
  if (value <= 0) dew::fail(file.name(), ": metadata '", key, "' is ", value, "; it must be positive");
  return value;
}

}  // namespace

const GgufArchitecture& gguf_file_architecture(const formats::GgufFile& file) {
  return gguf_architecture(file.at("general.architecture").as_string(), file.name());
}

// The sizes every architecture has; the row's own keys (norms, rotary, features) are read_gguf_features'.
nn::CausalTransformerConfig gguf_model_config(const formats::GgufFile& file, c10::ScalarType dtype) {
  const GgufArchitecture& arch = gguf_file_architecture(file);
  auto key = [&](const char* suffix) { return arch.name + "." + suffix; };
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
  // Mixture-of-experts files (ffn_*_exps tensors) need an MoE block; refused until a row has one.
  if (const auto* experts = file.find(key("expert_count")); experts && experts->as_int() > 0)
    dew::fail(file.name(), ": metadata '", key("expert_count"), "' is ", experts->as_int(),
              "; mixture-of-experts models are not supported");
  config.max_seq_len = positive(file, key("context_length"));
  config.vocab_size = static_cast<std::int64_t>(file.at("tokenizer.ggml.tokens").as_array().size());
  read_gguf_features(arch, file, config);
  config.dtype = config.param_dtype = nn::dtype_name(dtype);
  try {
    config.validate();
  } catch (const Error& e) {
    dew::fail(file.name(), ": the ", arch.name, " metadata describes an invalid model: ", e.what());
  }
  return config;
}

namespace {

GgufModel load(const std::filesystem::path& path, c10::ScalarType dtype, bool keep_quantized) {
  formats::GgufFile file(path);
  GgufModel out;
  out.architecture = gguf_file_architecture(file).name;
  out.hf_model_type = gguf_file_architecture(file).hf_families.front();
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
