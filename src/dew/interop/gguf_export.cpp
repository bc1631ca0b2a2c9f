// A CausalTransformer as llama.cpp's GGUF (metadata keys and tensor layout of convert_hf_to_gguf.py).
#include "dew/interop/gguf_export.h"

#include "dew/core/error.h"
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

// convert_hf_to_gguf.py's LlamaModel.permute: each head's rows from Hugging Face's rotate-half order
// [first halves..., second halves...] to interleaved pairs; view as [heads, 2, half] and swap the last two.
// load_gguf_weights' unpermute_rows is its inverse.
at::Tensor permute_rows(const at::Tensor& w, std::int64_t heads) {
  std::vector<std::int64_t> view{heads, 2, w.size(0) / heads / 2};
  for (std::int64_t d = 1; d < w.dim(); ++d) view.push_back(w.size(d));
  return w.reshape(view).transpose(1, 2).reshape(w.sizes()).contiguous();
}

// The type a tensor is stored in, as the converter chooses it: norms and 1-D tensors F32; Q8_0 needs rows
// that are whole 32-element blocks, else F16 (gguf-py's fallback).
formats::GgmlType tensor_type(const std::string& gguf_name, const at::Tensor& value, formats::GgmlType requested) {
  const bool is_norm = gguf_name.size() >= 12 && gguf_name.compare(gguf_name.size() - 12, 12, "_norm.weight") == 0;
  if (value.dim() <= 1 || is_norm) return formats::GgmlType::F32;
  if (requested == formats::GgmlType::Q8_0 && value.size(-1) % 32 != 0) return formats::GgmlType::F16;
  return requested;
}

void refuse(const std::string& architecture, const char* field, const std::string& what) {
  dew::fail("GGUF export: the model's ", field, " ", what, "; llama.cpp's ", architecture,
            " architecture cannot express it");
}

}  // namespace

void check_gguf_exportable(const nn::CausalTransformerConfig& c, const std::string& arch) {
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3")
    dew::fail("GGUF export: architecture \"", arch, "\" is not supported; use llama, qwen2 or qwen3");
  if (c.sandwich_norms) refuse(arch, "sandwich_norms", "is true");
  if (c.norm != "rmsnorm") refuse(arch, "norm", "is \"" + c.norm + "\" (only rmsnorm)");
  if (c.positions != "rotary") refuse(arch, "positions", "is \"" + c.positions + "\" (only rotary)");
  if (c.resolved_rotary_dim() != c.resolved_head_dim()) refuse(arch, "rotary_dim", "is " + std::to_string(c.rotary_dim) + " (partial rotary)");
  if (c.parallel_residual) refuse(arch, "parallel_residual", "is true");
  if (!c.qk_norm_per_head) refuse(arch, "qk_norm_per_head", "is false");
  if (c.residual_multiplier != 1) refuse(arch, "residual_multiplier", "is " + std::to_string(c.residual_multiplier));
  if (c.attention_scale != 0) refuse(arch, "attention_scale", "is " + std::to_string(c.attention_scale));
  if (c.logits_scaling != 1) refuse(arch, "logits_scaling", "is " + std::to_string(c.logits_scaling));
  if (c.mlp != "swiglu") refuse(arch, "mlp", "is \"" + c.mlp + "\" (only swiglu)");
  if (c.mlp_bias) refuse(arch, "mlp_bias", "is true");
  if (c.num_experts > 0) refuse(arch, "num_experts", "is " + std::to_string(c.num_experts) + " (a mixture of experts; export it as hf)");
  if (c.attn_logit_softcap != 0) refuse(arch, "attn_logit_softcap", "is " + std::to_string(c.attn_logit_softcap));
  if (c.final_logit_softcap != 0) refuse(arch, "final_logit_softcap", "is " + std::to_string(c.final_logit_softcap));
  if (c.query_pre_attn_scalar != 0 && c.query_pre_attn_scalar != static_cast<double>(c.resolved_head_dim()))
    refuse(arch, "query_pre_attn_scalar", "is " + std::to_string(c.query_pre_attn_scalar) + " (not head_dim)");
  if (c.norm_weight_offset != 0) refuse(arch, "norm_weight_offset", "is " + std::to_string(c.norm_weight_offset));
  if (c.embedding_scale != 1) refuse(arch, "embedding_scale", "is " + std::to_string(c.embedding_scale));
  if (!c.causal) refuse(arch, "causal", "is false (bidirectional attention)");
  if (c.rope_scaling.type != "none") refuse(arch, "rope_scaling.type", "is \"" + c.rope_scaling.type + "\"");
  for (std::int64_t layer = 0; layer < c.num_layers; ++layer) {
    if (c.window_of_layer(layer) != 0)
      refuse(arch, "layer_types", "gives layer " + std::to_string(layer) + " a sliding window of " +
                                      std::to_string(c.window_of_layer(layer)));
    if (c.kind_rope_theta_of_layer(layer) != 0)
      refuse(arch, "kinds", "give layer " + std::to_string(layer) + " its own rope_theta");
  }
  if (c.resolved_head_dim() % 2 != 0) refuse(arch, "head_dim", "is odd");
  if (arch == "qwen3" && !c.qk_norm) refuse(arch, "qk_norm", "is false (qwen3 always has it)");
  if (arch != "qwen3" && c.qk_norm) refuse(arch, "qk_norm", "is true (only qwen3 has it)");
  if (arch == "qwen3" && c.attention_bias) refuse(arch, "attention_bias", "is true");
  if (arch != "llama" && c.attention_output_bias) refuse(arch, "attention_output_bias", "is true");
  if (c.dtype != "float32" && c.dtype != "bfloat16" && c.dtype != "float16")
    refuse(arch, "dtype", "is \"" + c.dtype + "\"");
}

void add_gguf_model(formats::GgufWriter& writer, const nn::CausalTransformerImpl& model, const std::string& arch,
                    formats::GgmlType type, const std::string& name) {
  const auto& c = model.config();
  check_gguf_exportable(c, arch);
  const std::uint32_t file_type = file_type_of(type);
  auto key = [&](const char* suffix) { return arch + "." + suffix; };
  auto u32 = [](std::int64_t v) { return static_cast<std::uint32_t>(v); };
  writer.set_string("general.architecture", arch);
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
  writer.set_float32(key("rope.freq_base"), static_cast<float>(c.rope_theta));
  writer.set_float32(key("attention.layer_norm_rms_epsilon"), static_cast<float>(c.norm_eps));
  if (arch == "llama") writer.set_uint32(key("rope.dimension_count"), u32(c.resolved_head_dim()));
  writer.set_uint32("general.file_type", file_type);
  writer.set_uint32("general.quantization_version", 2);

  at::NoGradGuard no_grad;
  for (const auto& [parameter, tensor] : nn::parameter_map(model)) {
    const std::string gguf_name = gguf_tensor_name(parameter);
    at::Tensor value = tensor.detach();
    if (arch == "llama") {
      const bool q = gguf_name.find(".attn_q.") != std::string::npos;
      const bool k = gguf_name.find(".attn_k.") != std::string::npos;
      if (q || k) value = permute_rows(value, q ? c.num_heads : c.resolved_kv_heads());
    }
    writer.add_tensor(gguf_name, value, tensor_type(gguf_name, value, type));
  }
  // llama.cpp's qwen2 requires q/k/v biases; zeros compute the same as none.
  if (arch == "qwen2" && !c.attention_bias) {
    const std::int64_t q_rows = c.num_heads * c.resolved_head_dim(), kv_rows = c.resolved_kv_heads() * c.resolved_head_dim();
    for (std::int64_t layer = 0; layer < c.num_layers; ++layer) {
      const std::string blk = "blk." + std::to_string(layer) + ".";
      writer.add_tensor(blk + "attn_q.bias", at::zeros({q_rows}), formats::GgmlType::F32);
      writer.add_tensor(blk + "attn_k.bias", at::zeros({kv_rows}), formats::GgmlType::F32);
      writer.add_tensor(blk + "attn_v.bias", at::zeros({kv_rows}), formats::GgmlType::F32);
    }
  }
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
