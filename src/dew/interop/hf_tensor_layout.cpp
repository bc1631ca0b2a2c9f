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

// Per-expert stored names of the grouped expert weights: {stored pattern, dew parameter, which rows}, "{}"
// the layer and "{e}" the expert. Mixtral stores its MoE block as block_sparse_moe (router included).
struct ExpertRule {
  std::string stored, grouped;
  enum Rows { gate_half, up_half, all } rows;
};

const std::vector<ExpertRule>* expert_rules_of(const std::string& family) {
  static const std::vector<ExpertRule> mixtral = {
      {"model.layers.{}.block_sparse_moe.experts.{e}.w1.weight", "model.layers.{}.mlp.experts.gate_up_proj", ExpertRule::gate_half},
      {"model.layers.{}.block_sparse_moe.experts.{e}.w3.weight", "model.layers.{}.mlp.experts.gate_up_proj", ExpertRule::up_half},
      {"model.layers.{}.block_sparse_moe.experts.{e}.w2.weight", "model.layers.{}.mlp.experts.down_proj", ExpertRule::all},
  };
  static const std::vector<ExpertRule> qwen_moe = {
      {"model.layers.{}.mlp.experts.{e}.gate_proj.weight", "model.layers.{}.mlp.experts.gate_up_proj", ExpertRule::gate_half},
      {"model.layers.{}.mlp.experts.{e}.up_proj.weight", "model.layers.{}.mlp.experts.gate_up_proj", ExpertRule::up_half},
      {"model.layers.{}.mlp.experts.{e}.down_proj.weight", "model.layers.{}.mlp.experts.down_proj", ExpertRule::all},
  };
  if (family == "mixtral") return &mixtral;
  if (family == "qwen2_moe" || family == "qwen3_moe") return &qwen_moe;
  return nullptr;
}

const std::vector<ModuleRule>& mixtral_rules() {
  static const std::vector<ModuleRule> rules = {{"model.layers.{}.block_sparse_moe.gate", {"model.layers.{}.mlp.gate"}}};
  return rules;
}

// grouped_experts: a checkpoint under transformers' in-memory names, where Mixtral's router is mlp.gate too.
const std::vector<ModuleRule>& rules_of(const std::string& family, bool grouped_experts) {
  static const std::vector<ModuleRule> none;
  if (family == "gpt2") return gpt2_rules();
  if (family == "gpt_neox") return gpt_neox_rules();
  if (family == "phi3") return phi3_rules();
  if (family == "mixtral") return grouped_experts ? none : mixtral_rules();
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

std::string at_expert(std::string pattern, std::int64_t expert) {
  auto at = pattern.find("{e}");
  return pattern.replace(at, 3, std::to_string(expert));
}

// The per-expert entries of the grouped expert weights the model has (in layer, expert, rule order, as
// save_pretrained writes them).
void add_expert_entries(const std::string& family, const std::set<std::string>& present, std::int64_t num_layers,
                        const ExpertStorage& experts, HfTensorLayout& layout, std::set<std::string>& covered) {
  const auto* rules = expert_rules_of(family);
  if (!rules || experts.experts == 0 || experts.grouped) return;
  for (std::int64_t i = 0; i < num_layers; ++i) {
    const auto layer = std::to_string(i);
    for (std::int64_t e = 0; e < experts.experts; ++e) {
      for (const auto& rule : *rules) {
        const auto grouped = at_layer(rule.grouped, layer);
        if (!present.count(grouped)) continue;  // a dense layer (mlp_only_layers, decoder_sparse_step)
        const auto F = experts.features;
        StoredTensor entry{at_expert(at_layer(rule.stored, layer), e), {grouped}, Fuse::expert_slice};
        entry.expert = e;
        entry.row_begin = rule.rows == ExpertRule::up_half ? F : 0;
        entry.rows = rule.rows == ExpertRule::all ? 0 : F;  // 0: every row
        covered.insert(grouped);
        layout.tensors.push_back(std::move(entry));
      }
    }
  }
}

}  // namespace

HfTensorLayout hf_tensor_layout(const std::string& family, const std::vector<std::string>& dew_names, std::int64_t num_layers,
                                std::int64_t num_heads, const ExpertStorage& experts) {
  HfTensorLayout layout;
  const std::set<std::string> present(dew_names.begin(), dew_names.end());
  std::set<std::string> covered;
  add_expert_entries(family, present, num_layers, experts, layout, covered);
  const auto& rules = rules_of(family, experts.grouped);
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

at::Tensor stored_block(const StoredTensor& entry, const at::Tensor& param) {
  if (entry.fuse != Fuse::expert_slice) return param;
  auto block = param.select(0, entry.expert);
  return entry.rows > 0 ? block.narrow(0, entry.row_begin, entry.rows) : block;
}

std::vector<std::int64_t> fused_shape(const StoredTensor& entry, const std::vector<std::vector<std::int64_t>>& part_shapes) {
  auto shape = part_shapes.at(0);
  if (entry.fuse == Fuse::expert_slice) return {entry.rows > 0 ? entry.rows : shape.at(1), shape.at(2)};
  for (std::size_t i = 1; i < part_shapes.size(); ++i) shape[0] += part_shapes[i][0];
  if (entry.fuse == Fuse::conv1d && shape.size() == 2) std::swap(shape[0], shape[1]);
  return shape;
}

std::vector<at::Tensor> split_fused(const StoredTensor& entry, const at::Tensor& stored,
                                    const std::vector<std::vector<std::int64_t>>& part_shapes) {
  if (entry.fuse == Fuse::expert_slice) return {stored};  // stored_block(entry, param) is where it goes
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
  if (entry.fuse == Fuse::expert_slice) return stored_block(entry, parts.at(0)).contiguous();
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
