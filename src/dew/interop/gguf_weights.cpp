// GGUF tensor names <-> CausalTransformer parameters, and what llama.cpp's converter does to them on the
// way into the file (fuses q/k/v and gate/up, permutes llama's Q/K rows, adds 1 to gemma's norms), undone on
// load and redone on export.
#include <cstring>
#include <map>
#include <regex>
#include <set>

#include "dew/core/error.h"
#include "dew/formats/gguf.h"
#include "dew/interop/gguf_export.h"
#include "dew/interop/gguf_model.h"
#include "dew/nn/parameters.h"
#include "dew/nn/quantized_weights.h"

namespace dew::interop {
namespace {

// Hugging Face module path inside a block -> llama.cpp's tensor name inside blk.N.
const std::map<std::string, std::string>& block_names() {
  static const std::map<std::string, std::string> names = {
      {"input_layernorm", "attn_norm"},          {"self_attn.q_proj", "attn_q"},
      {"self_attn.k_proj", "attn_k"},            {"self_attn.v_proj", "attn_v"},
      {"self_attn.o_proj", "attn_output"},       {"self_attn.q_norm", "attn_q_norm"},
      {"self_attn.k_norm", "attn_k_norm"},       {"post_attention_layernorm", "ffn_norm"},
      {"mlp.gate_proj", "ffn_gate"},             {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},
  };
  return names;
}

// llama.cpp's convert_hf_to_gguf.py (LlamaModel.permute, applied to the llama architecture's q_proj and
// k_proj only; qwen2/qwen3 are written unpermuted) reorders each head's rows from Hugging Face's
// rotate-half layout [first halves..., second halves...] to interleaved pairs. This is its inverse:
// view the rows as [heads, half, 2] and swap the last two.
at::Tensor unpermute_rows(const at::Tensor& w, std::int64_t heads) {
  std::vector<std::int64_t> view{heads, w.size(0) / heads / 2, 2};
  for (std::int64_t d = 1; d < w.dim(); ++d) view.push_back(w.size(d));
  return w.reshape(view).transpose(1, 2).reshape(w.sizes()).contiguous();
}

// The same reordering as a row index, for matrices kept in their quantized blocks: row i of the result is
// row index[i] of the file's matrix.
at::Tensor unpermute_index(std::int64_t rows, std::int64_t heads) {
  return at::arange(rows, at::kLong).reshape({heads, rows / heads / 2, 2}).transpose(1, 2).reshape({rows});
}

std::string shape_text(const std::vector<std::int64_t>& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}


// Each parameter's change on the way into the file: the permuted rows (0 = none) and the added constant.
struct Change {
  std::int64_t permute_heads = 0;
  double shift = 0.0;
};

Change change_of(const GgufArchitecture& a, const std::string& parameter, const nn::CausalTransformerConfig& c) {
  Change out;
  if (a.permuted_qk && parameter.find(".self_attn.q_proj.") != std::string::npos) out.permute_heads = c.num_heads;
  if (a.permuted_qk && parameter.find(".self_attn.k_proj.") != std::string::npos) out.permute_heads = c.resolved_kv_heads();
  // GemmaModel.modify_tensors (and Gemma3Model.norm_shift): every "*norm.weight" + 1, q/k norms included.
  if (a.gemma && parameter.ends_with("norm.weight")) out.shift = 1.0;
  return out;
}

// convert_hf_to_gguf.py's LlamaModel.permute: each head's rows from rotate-half order to interleaved pairs
// (view as [heads, 2, half] and swap the last two); unpermute_rows is its inverse.
at::Tensor permute_rows(const at::Tensor& w, std::int64_t heads) {
  std::vector<std::int64_t> view{heads, 2, w.size(0) / heads / 2};
  for (std::int64_t d = 1; d < w.dim(); ++d) view.push_back(w.size(d));
  return w.reshape(view).transpose(1, 2).reshape(w.sizes()).contiguous();
}

std::vector<std::vector<std::int64_t>> part_shapes(const StoredTensor& entry, const std::map<std::string, at::Tensor>& params) {
  std::vector<std::vector<std::int64_t>> shapes;
  for (const auto& part : entry.parts) shapes.push_back(params.at(part).sizes().vec());
  return shapes;
}

// Tensors llama.cpp reads that dew's model cannot hold, refused by name.
void refuse_extra_tensor(const formats::GgufFile& file, const GgufArchitecture& a, const std::string& name, std::int64_t layers) {
  if (name == "rope_freqs.weight")
    dew::fail(file.name(), ": tensor 'rope_freqs.weight' scales the rotary frequencies (Llama 3.1 style); "
              "rotary scaling other than linear is not supported for GGUF models");
  if (name.starts_with("rope_factors_"))
    dew::fail(file.name(), ": tensor '", name, "' holds longrope's per-frequency factors (Phi-3 128k); "
              "longrope is not supported for GGUF models");
  if (name.find("_exps.") != std::string::npos)
    dew::fail(file.name(), ": tensor '", name, "' holds mixture-of-experts weights, which dew does not load");
  dew::fail(file.name(), ": tensor '", name, "' has no place in a ", a.name, " decoder of ", layers,
            " layers (unexpected tensor)");
}

// Held as the file's blocks: copied (the file is closed after loading), rows reordered for permuted Q/K.
void hold_file_blocks(nn::CausalTransformerImpl& model, const formats::GgufFile& file, const formats::GgufTensorInfo& info,
                      const std::string& parameter, const Change& change) {
  auto data = file.data(info);
  auto bytes = at::empty({static_cast<std::int64_t>(data.size())}, at::kByte);
  std::memcpy(bytes.data_ptr<std::uint8_t>(), data.data(), data.size());
  nn::QuantizedMatrix matrix(info.type, info.dims[1], info.dims[0], bytes, info.name);
  if (change.permute_heads) matrix = matrix.select_rows(unpermute_index(matrix.rows(), change.permute_heads));
  nn::hold_quantized(model, parameter, std::make_shared<const nn::QuantizedMatrix>(std::move(matrix)));
}

}  // namespace

std::string gguf_tensor_name(const std::string& parameter, bool sandwich) {
  if (parameter == "model.embed_tokens.weight") return "token_embd.weight";
  if (parameter == "model.embed_positions.weight") return "position_embd.weight";
  if (parameter == "model.norm.weight") return "output_norm.weight";
  if (parameter == "model.norm.bias") return "output_norm.bias";
  if (parameter == "lm_head.weight") return "output.weight";
  static const std::regex block(R"(model\.layers\.(\d+)\.(.+)\.(weight|bias))");
  std::smatch m;
  if (std::regex_match(parameter, m, block)) {
    std::string module = m[2].str();
    std::string gguf;
    if (sandwich && module == "post_attention_layernorm") gguf = "post_attention_norm";
    else if (sandwich && module == "pre_feedforward_layernorm") gguf = "ffn_norm";
    else if (sandwich && module == "post_feedforward_layernorm") gguf = "post_ffw_norm";
    else if (auto it = block_names().find(module); it != block_names().end()) gguf = it->second;
    if (!gguf.empty()) return "blk." + m[1].str() + "." + gguf + "." + m[3].str();
  }
  dew::fail("parameter '", parameter, "' has no GGUF tensor name (dew maps the decoder parameters of the architectures ",
            gguf_architecture_names(), ")");
}

std::vector<StoredTensor> gguf_tensor_layout(const GgufArchitecture& a, const std::vector<std::string>& parameters) {
  static const std::regex fusable(R"(model\.layers\.(\d+)\.(self_attn\.[qkv]_proj|mlp\.(?:gate|up)_proj)\.(weight|bias))");
  const std::set<std::string> present(parameters.begin(), parameters.end());
  std::set<std::string> covered;
  std::vector<StoredTensor> out;
  for (const auto& parameter : parameters) {
    if (covered.count(parameter)) continue;
    std::smatch m;
    if (std::regex_match(parameter, m, fusable)) {
      const std::string blk = "model.layers." + m[1].str() + ".", leaf = "." + m[3].str();
      const bool attention = m[2].str().starts_with("self_attn");
      StoredTensor entry{"blk." + m[1].str() + (attention ? ".attn_qkv" : ".ffn_up") + leaf, {}, Fuse::concat};
      if (attention && a.fused_qkv) {
        for (const char* p : {"q_proj", "k_proj", "v_proj"}) entry.parts.push_back(blk + "self_attn." + p + leaf);
      } else if (!attention && a.fused_gate_up) {
        for (const char* p : {"gate_proj", "up_proj"}) entry.parts.push_back(blk + "mlp." + p + leaf);
      }
      if (!entry.parts.empty()) {
        for (const auto& part : entry.parts)
          if (!present.count(part)) dew::fail("parameter '", part, "' is missing; ", a.name, "'s ", entry.name, " fuses it");
        covered.insert(entry.parts.begin(), entry.parts.end());
        out.push_back(std::move(entry));
        continue;
      }
    }
    out.push_back({gguf_tensor_name(parameter, a.sandwich), {parameter}, Fuse::none});
  }
  return out;
}

void load_gguf_weights(nn::CausalTransformerImpl& model, const formats::GgufFile& file, const std::string& architecture,
                       bool keep_quantized) {
  at::NoGradGuard no_grad;
  const GgufArchitecture& a = gguf_architecture(architecture, file.name());
  const auto& config = model.config();
  const auto params = nn::parameter_map(model);
  std::vector<std::string> names;
  for (const auto& [name, tensor] : params) names.push_back(name);
  const auto layout = gguf_tensor_layout(a, names);
  std::set<std::string> wanted;
  // Everything is checked before anything is dequantized: missing tensors and shapes first, then
  // tensors the model has no place for.
  for (const auto& entry : layout) {
    wanted.insert(entry.name);
    const formats::GgufTensorInfo* info = file.find_tensor(entry.name);
    if (!info) dew::fail(file.name(), ": tensor '", entry.name, "' is missing; a ", a.name, " decoder needs it");
    const auto shape = fused_shape(entry, part_shapes(entry, params));
    std::vector<std::int64_t> expected(shape.rbegin(), shape.rend());  // ggml order
    if (info->dims != expected)
      dew::fail(file.name(), ": tensor '", entry.name, "' has ggml shape ", shape_text(info->dims), " but the metadata ",
                "describes ", shape_text(expected), " (ggml order, fastest dimension first)");
  }
  for (const auto& info : file.tensors())
    if (!wanted.count(info.name)) refuse_extra_tensor(file, a, info.name, config.num_layers);
  for (const auto& entry : layout) {
    const formats::GgufTensorInfo& info = file.tensor(entry.name);
    const Change first = change_of(a, entry.parts[0], config);
    if (keep_quantized && entry.parts.size() == 1 && first.shift == 0.0 && info.dims.size() == 2 &&
        nn::has_quantized_kernel(info.type)) {
      hold_file_blocks(model, file, info, entry.parts[0], first);
      continue;
    }
    at::Tensor value = formats::gguf_tensor(file, entry.name, at::kFloat);
    nn::require_finite(value, file.name(), entry.name);
    const auto parts = split_fused(entry, value, part_shapes(entry, params));
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const Change change = change_of(a, entry.parts[i], config);
      at::Tensor part = parts[i];
      if (change.permute_heads) part = unpermute_rows(part, change.permute_heads);
      if (change.shift != 0.0) part = part - change.shift;
      params.at(entry.parts[i]).copy_(part);
    }
  }
}

std::vector<std::pair<std::string, at::Tensor>> gguf_model_tensors(const nn::CausalTransformerImpl& model,
                                                                   const GgufArchitecture& a) {
  at::NoGradGuard no_grad;
  const auto& c = model.config();
  const auto params = nn::parameter_map(model);
  std::vector<std::string> names;
  for (const auto& [name, tensor] : params) names.push_back(name);
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& entry : gguf_tensor_layout(a, names)) {
    std::vector<at::Tensor> parts;
    for (const auto& parameter : entry.parts) {
      const Change change = change_of(a, parameter, c);
      at::Tensor value = params.at(parameter).detach();
      if (change.shift != 0.0) value = value.to(at::kFloat) + change.shift;  // in float32, as the converter adds it
      if (change.permute_heads) value = permute_rows(value, change.permute_heads);
      parts.push_back(value);
    }
    out.emplace_back(entry.name, fuse_parts(entry, parts));
  }
  // llama.cpp's olmo2 requires output.weight: a tied model writes its embeddings there.
  if (a.output_required && c.tie_embeddings) out.emplace_back("output.weight", params.at("model.embed_tokens.weight").detach());
  // llama.cpp's qwen2 requires q/k/v biases; zeros compute the same as none.
  if (a.biases == GgufBiases::qkv && !c.attention_bias) {
    const std::int64_t q_rows = c.num_heads * c.resolved_head_dim(), kv_rows = c.resolved_kv_heads() * c.resolved_head_dim();
    for (std::int64_t layer = 0; layer < c.num_layers; ++layer) {
      const std::string blk = "blk." + std::to_string(layer) + ".";
      out.emplace_back(blk + "attn_q.bias", at::zeros({q_rows}));
      out.emplace_back(blk + "attn_k.bias", at::zeros({kv_rows}));
      out.emplace_back(blk + "attn_v.bias", at::zeros({kv_rows}));
    }
  }
  return out;
}

}  // namespace dew::interop
