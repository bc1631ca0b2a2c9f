#include "dew/interop/hf_tensor_layout.h"

#include <map>
#include <set>

#include "dew/core/error.h"
#include "dew/interop/hf_llada.h"

namespace dew::interop {

namespace {

// One stored module (its .weight and .bias) from dew modules; "{}" stands for the layer index.
struct ModuleRule {
  std::string stored;
  std::vector<std::string> parts;
  Fuse fuse = Fuse::none;
};

const std::vector<ModuleRule>& gpt2_rules() {
  static const std::vector<ModuleRule> rules = {
      {"transformer.wte", {"model.embed_tokens"}},
      {"transformer.wpe", {"model.embed_positions"}},
      {"transformer.h.{}.ln_1", {"model.layers.{}.input_layernorm"}},
      {"transformer.h.{}.attn.c_attn",
       {"model.layers.{}.self_attn.q_proj", "model.layers.{}.self_attn.k_proj", "model.layers.{}.self_attn.v_proj"}, Fuse::conv1d},
      {"transformer.h.{}.attn.c_proj", {"model.layers.{}.self_attn.o_proj"}, Fuse::conv1d},
      {"transformer.h.{}.ln_2", {"model.layers.{}.post_attention_layernorm"}},
      {"transformer.h.{}.mlp.c_fc", {"model.layers.{}.mlp.up_proj"}, Fuse::conv1d},
      {"transformer.h.{}.mlp.c_proj", {"model.layers.{}.mlp.down_proj"}, Fuse::conv1d},
      {"transformer.ln_f", {"model.norm"}},
  };
  return rules;
}

const std::vector<ModuleRule>& gpt_neox_rules() {
  static const std::vector<ModuleRule> rules = {
      {"gpt_neox.embed_in", {"model.embed_tokens"}},
      {"gpt_neox.layers.{}.input_layernorm", {"model.layers.{}.input_layernorm"}},
      {"gpt_neox.layers.{}.post_attention_layernorm", {"model.layers.{}.post_attention_layernorm"}},
      {"gpt_neox.layers.{}.attention.query_key_value",
       {"model.layers.{}.self_attn.q_proj", "model.layers.{}.self_attn.k_proj", "model.layers.{}.self_attn.v_proj"}, Fuse::per_head_qkv},
      {"gpt_neox.layers.{}.attention.dense", {"model.layers.{}.self_attn.o_proj"}},
      {"gpt_neox.layers.{}.mlp.dense_h_to_4h", {"model.layers.{}.mlp.up_proj"}},
      {"gpt_neox.layers.{}.mlp.dense_4h_to_h", {"model.layers.{}.mlp.down_proj"}},
      {"gpt_neox.final_layer_norm", {"model.norm"}},
      {"embed_out", {"lm_head"}},
  };
  return rules;
}

const std::vector<ModuleRule>& phi3_rules() {
  static const std::vector<ModuleRule> rules = {
      {"model.layers.{}.self_attn.qkv_proj",
       {"model.layers.{}.self_attn.q_proj", "model.layers.{}.self_attn.k_proj", "model.layers.{}.self_attn.v_proj"}, Fuse::concat},
      {"model.layers.{}.mlp.gate_up_proj", {"model.layers.{}.mlp.gate_proj", "model.layers.{}.mlp.up_proj"}, Fuse::concat},
  };
  return rules;
}

const std::vector<ModuleRule>& rules_of(const std::string& family) {
  static const std::vector<ModuleRule> none;
  if (family == "gpt2") return gpt2_rules();
  if (family == "gpt_neox") return gpt_neox_rules();
  if (family == "phi3") return phi3_rules();
  return none;
}

std::string at_layer(std::string pattern, const std::string& layer) {
  auto at = pattern.find("{}");
  return at == std::string::npos ? pattern : pattern.replace(at, 2, layer);
}

// The stored name of a dew module under the rules (unfused ones only), else the module itself.
std::string stored_module(const std::vector<ModuleRule>& rules, const std::string& dew_module) {
  for (const auto& rule : rules) {
    if (rule.parts.size() == 1 && rule.parts[0] == dew_module) return rule.stored;
  }
  return dew_module;
}

}  // namespace

HfTensorLayout hf_tensor_layout(const std::string& family, const std::vector<std::string>& dew_names, std::int64_t num_layers,
                                std::int64_t num_heads) {
  HfTensorLayout layout;
  const std::set<std::string> present(dew_names.begin(), dew_names.end());
  std::set<std::string> covered;
  const auto& rules = rules_of(family);
  for (const auto& rule : rules) {
    const bool per_layer = rule.stored.find("{}") != std::string::npos;
    for (std::int64_t i = 0; i < (per_layer ? num_layers : 1); ++i) {
      const auto layer = std::to_string(i);
      for (const char* leaf : {".weight", ".bias"}) {
        StoredTensor entry{at_layer(rule.stored, layer) + leaf, {}, rule.fuse, num_heads};
        for (const auto& part : rule.parts) entry.parts.push_back(at_layer(part, layer) + leaf);
        bool all = true;
        for (const auto& part : entry.parts) all = all && present.count(part);
        if (!all) continue;  // a bias the model has not, a head that is tied, learned positions it has not
        covered.insert(entry.parts.begin(), entry.parts.end());
        layout.tensors.push_back(std::move(entry));
      }
    }
  }
  const bool llada = family == "llada";
  for (const auto& name : dew_names) {
    if (!covered.count(name)) layout.tensors.push_back({llada ? llada_tensor_name(name) : name, {name}, Fuse::none});
  }
  layout.embedding = llada ? llada_tensor_name("model.embed_tokens.weight") : stored_module(rules, "model.embed_tokens") + ".weight";
  layout.head = llada ? llada_tensor_name("lm_head.weight") : stored_module(rules, "lm_head") + ".weight";
  if (family == "gpt2") layout.optional_prefix = "transformer.";
  return layout;
}

bool hf_ignorable_tensor(const std::string& family, const std::string& name) {
  if (name.ends_with(".rotary_emb.inv_freq")) return true;
  if (family == "gpt2") return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
  if (family == "gpt_neox") return name.ends_with(".attention.bias") || name.ends_with(".attention.masked_bias");
  return false;
}

std::vector<std::int64_t> fused_shape(const StoredTensor& entry, const std::vector<std::vector<std::int64_t>>& part_shapes) {
  auto shape = part_shapes.at(0);
  for (std::size_t i = 1; i < part_shapes.size(); ++i) shape[0] += part_shapes[i][0];
  if (entry.fuse == Fuse::conv1d && shape.size() == 2) std::swap(shape[0], shape[1]);
  return shape;
}

std::vector<at::Tensor> split_fused(const StoredTensor& entry, const at::Tensor& stored,
                                    const std::vector<std::vector<std::int64_t>>& part_shapes) {
  std::vector<at::Tensor> parts;
  if (entry.fuse == Fuse::per_head_qkv) {
    // [heads * 3 * head_dim, ...] viewed as [heads, 3, head_dim, ...]: part j is [:, j], flattened back.
    std::vector<std::int64_t> grouped = {entry.heads, 3, stored.size(0) / (3 * entry.heads)};
    grouped.insert(grouped.end(), stored.sizes().begin() + 1, stored.sizes().end());
    auto view = stored.reshape(grouped);
    for (std::int64_t j = 0; j < 3; ++j) parts.push_back(view.select(1, j).reshape(part_shapes.at(j)));
    return parts;
  }
  const at::Tensor rows_first = entry.fuse == Fuse::conv1d && stored.dim() == 2 ? stored.t() : stored;
  std::int64_t offset = 0;
  for (const auto& shape : part_shapes) {
    parts.push_back(rows_first.narrow(0, offset, shape[0]));
    offset += shape[0];
  }
  return parts;
}

at::Tensor fuse_parts(const StoredTensor& entry, const std::vector<at::Tensor>& parts) {
  if (entry.fuse == Fuse::per_head_qkv) {
    std::vector<at::Tensor> grouped;
    for (const auto& part : parts) {
      std::vector<std::int64_t> shape = {entry.heads, part.size(0) / entry.heads};
      shape.insert(shape.end(), part.sizes().begin() + 1, part.sizes().end());
      grouped.push_back(part.reshape(shape));
    }
    auto stacked = at::stack(grouped, 1);  // [heads, 3, head_dim, ...]
    std::vector<std::int64_t> shape = {stacked.size(0) * 3 * stacked.size(2)};
    shape.insert(shape.end(), stacked.sizes().begin() + 3, stacked.sizes().end());
    return stacked.reshape(shape).contiguous();
  }
  at::Tensor rows = parts.size() == 1 ? parts[0] : at::cat(parts, 0);
  if (entry.fuse == Fuse::conv1d && rows.dim() == 2) rows = rows.t();
  return rows.contiguous();
}

}  // namespace dew::interop
