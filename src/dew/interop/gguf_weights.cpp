// GGUF tensor names <-> CausalTransformer parameters, and the Q/K row order llama.cpp's converter changes.
#include <cstring>
#include <map>
#include <regex>
#include <set>

#include "dew/core/error.h"
#include "dew/formats/gguf.h"
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

}  // namespace

std::string gguf_tensor_name(const std::string& parameter) {
  if (parameter == "model.embed_tokens.weight") return "token_embd.weight";
  if (parameter == "model.norm.weight") return "output_norm.weight";
  if (parameter == "lm_head.weight") return "output.weight";
  static const std::regex block(R"(model\.layers\.(\d+)\.(.+)\.(weight|bias))");
  std::smatch m;
  if (std::regex_match(parameter, m, block)) {
    auto it = block_names().find(m[2].str());
    if (it != block_names().end()) return "blk." + m[1].str() + "." + it->second + "." + m[3].str();
  }
  dew::fail("parameter '", parameter, "' has no GGUF tensor name (dew maps the Llama/Qwen decoder's parameters only)");
}

void load_gguf_weights(nn::CausalTransformerImpl& model, const formats::GgufFile& file, const std::string& architecture,
                       bool keep_quantized) {
  at::NoGradGuard no_grad;
  const auto& config = model.config();
  std::set<std::string> wanted;
  std::vector<std::pair<std::string, at::Tensor>> targets;
  std::map<std::string, std::string> parameter_of;  // GGUF name -> parameter name
  for (auto& [parameter, tensor] : nn::parameter_map(model)) {
    std::string name = gguf_tensor_name(parameter);
    wanted.insert(name);
    targets.emplace_back(name, tensor);
    parameter_of[name] = parameter;
  }
  // Everything is checked before anything is dequantized: missing tensors and shapes first, then
  // tensors the model has no place for.
  for (auto& [name, target] : targets) {
    const formats::GgufTensorInfo* info = file.find_tensor(name);
    if (!info) dew::fail(file.name(), ": tensor '", name, "' is missing; a ", architecture, " decoder needs it");
    std::vector<std::int64_t> expected(target.sizes().rbegin(), target.sizes().rend());  // ggml order
    if (info->dims != expected)
      dew::fail(file.name(), ": tensor '", name, "' has ggml shape ", shape_text(info->dims), " but the metadata ",
                "describes ", shape_text(expected), " (ggml order, fastest dimension first)");
  }
  for (const auto& info : file.tensors()) {
    if (wanted.count(info.name)) continue;
    if (info.name == "rope_freqs.weight")
      dew::fail(file.name(), ": tensor 'rope_freqs.weight' scales the rotary frequencies (Llama 3.1 style); "
                "rotary scaling is not supported for GGUF models");
    dew::fail(file.name(), ": tensor '", info.name, "' has no place in a ", architecture, " decoder of ",
              config.num_layers, " layers (unexpected tensor)");
  }
  for (auto& [name, target] : targets) {
    const formats::GgufTensorInfo& info = file.tensor(name);
    if (keep_quantized && info.dims.size() == 2 && nn::has_quantized_kernel(info.type)) {
      // Held as the file's blocks: copied (the file is closed after loading), rows reordered for llama's Q/K.
      auto data = file.data(info);
      auto bytes = at::empty({static_cast<std::int64_t>(data.size())}, at::kByte);
      std::memcpy(bytes.data_ptr<std::uint8_t>(), data.data(), data.size());
      nn::QuantizedMatrix matrix(info.type, info.dims[1], info.dims[0], bytes, name);
      if (architecture == "llama") {
        bool q = name.find(".attn_q.") != std::string::npos, k = name.find(".attn_k.") != std::string::npos;
        if (q || k) matrix = matrix.select_rows(unpermute_index(matrix.rows(), q ? config.num_heads : config.resolved_kv_heads()));
      }
      nn::hold_quantized(model, parameter_of.at(name), std::make_shared<const nn::QuantizedMatrix>(std::move(matrix)));
      continue;
    }
    at::Tensor value = formats::gguf_tensor(file, name, target.scalar_type());
    nn::require_finite(value, file.name(), name);
    if (architecture == "llama") {
      bool q = name.find(".attn_q.") != std::string::npos, k = name.find(".attn_k.") != std::string::npos;
      if (q || k) value = unpermute_rows(value, q ? config.num_heads : config.resolved_kv_heads());
    }
    target.copy_(value);
  }
}

}  // namespace dew::interop
