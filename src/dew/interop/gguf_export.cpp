// A CausalTransformer as llama.cpp's GGUF (metadata keys and tensor layout of convert_hf_to_gguf.py).
#include "dew/interop/gguf_export.h"

#include "dew/core/error.h"
#include "dew/interop/gguf_architecture.h"
#include "dew/interop/gguf_model.h"
#include "dew/nn/parameters.h"

namespace dew::interop {
namespace {

// llama.cpp's llama_ftype values for general.file_type.
std::uint32_t file_type_of(formats::GgmlType type) {
  switch (type) {
    case formats::GgmlType::F32: return 0;   // ALL_F32
    case formats::GgmlType::F16: return 1;   // MOSTLY_F16
    case formats::GgmlType::Q8_0: return 7;  // MOSTLY_Q8_0
    default:
      dew::fail("GGUF export: tensor type ", formats::ggml_type_name(type), " is not supported; use F32, F16 or Q8_0");
  }
}

// The type a tensor is stored in, as the converter chooses it: norms and 1-D tensors F32; Q8_0 needs rows
// that are whole 32-element blocks, else F16 (gguf-py's fallback).
formats::GgmlType tensor_type(const std::string& gguf_name, const at::Tensor& value, formats::GgmlType requested) {
  const bool is_norm = gguf_name.size() >= 12 && gguf_name.compare(gguf_name.size() - 12, 12, "_norm.weight") == 0;
  if (value.dim() <= 1 || is_norm) return formats::GgmlType::F32;
  if (requested == formats::GgmlType::Q8_0 && value.size(-1) % 32 != 0) return formats::GgmlType::F16;
  return requested;
}

}  // namespace

void check_gguf_exportable(const nn::CausalTransformerConfig& c, const std::string& arch) {
  refuse_gguf_features(gguf_export_architecture(arch), c);
}

// The sizes every architecture has, then the row's own keys (write_gguf_features) and tensors
// (gguf_model_tensors: fused, permuted and shifted as the converter writes them).
void add_gguf_model(formats::GgufWriter& writer, const nn::CausalTransformerImpl& model, const std::string& arch_name,
                    formats::GgmlType type, const std::string& name) {
  const auto& c = model.config();
  const GgufArchitecture& arch = gguf_export_architecture(arch_name);
  refuse_gguf_features(arch, c);
  const std::uint32_t file_type = file_type_of(type);
  auto key = [&](const char* suffix) { return arch.name + "." + suffix; };
  auto u32 = [](std::int64_t v) { return static_cast<std::uint32_t>(v); };
  writer.set_string("general.architecture", arch.name);
  writer.set_string("general.type", "model");
  writer.set_string("general.name", name);
  writer.set_uint32(key("vocab_size"), u32(c.vocab_size));
  writer.set_uint32(key("context_length"), u32(c.max_seq_len));
  writer.set_uint32(key("embedding_length"), u32(c.emb_features));
  writer.set_uint32(key("block_count"), u32(c.num_layers));
  writer.set_uint32(key("feed_forward_length"), u32(c.resolved_mlp_features()));
  writer.set_uint32(key("attention.head_count"), u32(c.num_heads));
  writer.set_uint32(key("attention.head_count_kv"), u32(c.resolved_kv_heads()));
  if (c.resolved_head_dim() * c.num_heads != c.emb_features) {
    writer.set_uint32(key("attention.key_length"), u32(c.resolved_head_dim()));
    writer.set_uint32(key("attention.value_length"), u32(c.resolved_head_dim()));
  }
  write_gguf_features(arch, c, writer);
  writer.set_uint32("general.file_type", file_type);
  writer.set_uint32("general.quantization_version", 2);
  for (const auto& [gguf_name, value] : gguf_model_tensors(model, arch))
    writer.add_tensor(gguf_name, value, tensor_type(gguf_name, value, type));
}

void save_gguf_model(const nn::CausalTransformer& model, const data::PretrainedTokenizer& tokenizer,
                     const std::string& architecture, const std::filesystem::path& file, formats::GgmlType type,
                     const GgufExportOptions& options) {
  if (!model) dew::fail("GGUF export to ", file.string(), ": the model is empty");
  formats::GgufWriter writer;
  try {
    add_gguf_model(writer, *model, architecture, type, options.name);
    add_gguf_tokenizer(writer, tokenizer, model->config().vocab_size, options.tokenizer_pre);
  } catch (const Error& e) {
    dew::fail(file.string(), ": ", e.what());
  }
  writer.write(file);
}

}  // namespace dew::interop
