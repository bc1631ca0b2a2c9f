#include "dew/interop/hf_moe_config.h"

#include <cmath>

#include "dew/core/error.h"

namespace dew::interop::detail {

namespace {

using Json = nlohmann::ordered_json;

std::vector<std::int64_t> read_layer_list(const HfConfigReader& r, const std::string& key, std::int64_t layers) {
  std::vector<std::int64_t> out;
  const Json* list = r.get(key);
  if (!list) return out;
  if (!list->is_array()) dew::fail(r.source(), ": ", key, " is ", list->dump(), "; expected a list of layer indices");
  for (const auto& item : *list) {
    if (!item.is_number_integer() || item.get<std::int64_t>() < 0 || item.get<std::int64_t>() >= layers) {
      dew::fail(r.source(), ": ", key, " has ", item.dump(), "; layers are 0 .. ", layers - 1, " (num_hidden_layers)");
    }
    out.push_back(item.get<std::int64_t>());
  }
  return out;
}

// Qwen-MoE's sliding-window layers (their own rule, differing between the two) are not read: refused.
void refuse_qwen_sliding(const HfConfigReader& r) {
  if (r.boolean("use_sliding_window", false)) {
    dew::fail(r.source(), ": use_sliding_window is true; dew reads Qwen-MoE checkpoints with full attention on every layer (set it to false)");
  }
  if (const Json* types = r.get("layer_types")) {
    for (const auto& t : *types) {
      if (t != "full_attention") dew::fail(r.source(), ": layer_types has ", t.dump(), "; dew reads Qwen-MoE checkpoints whose layers all attend fully");
    }
  }
  // Inert without use_sliding_window: sliding_window, max_window_layers.
}

[[noreturn]] void refuse(const std::string& model_type, const std::string& field, const std::string& why) {
  dew::fail("cannot export as ", model_type, ": model.", field, " ", why);
}

}  // namespace

bool hf_moe_family(const std::string& model_type) {
  return model_type == "mixtral" || model_type == "qwen2_moe" || model_type == "qwen3_moe";
}

void read_moe_fields(const HfConfigReader& r, const std::string& model_type, nn::CausalTransformerConfig& c) {
  const bool mixtral = model_type == "mixtral";
  // transformers' attribute_map lets either spelling through (Mixtral and Qwen3-MoE: num_local_experts).
  const char* count = r.has("num_local_experts") ? "num_local_experts" : "num_experts";
  c.num_experts = r.integer(count, mixtral ? 8 : model_type == "qwen2_moe" ? 60 : 128);
  c.experts_per_token = r.integer("num_experts_per_tok", mixtral ? 2 : model_type == "qwen2_moe" ? 4 : 8);
  c.router_aux_loss_coef = r.number("router_aux_loss_coef", 0.001);
  if (mixtral) {
    c.expert_features = c.mlp_features;  // Mixtral's intermediate_size is each expert's width
    c.norm_topk_prob = true;
    if (r.number("router_jitter_noise", 0.0) != 0.0) {
      dew::fail(r.source(), ": router_jitter_noise is ", r.number("router_jitter_noise"),
                "; dew's router takes no noise in training, so fine-tuning would differ (set it to 0.0 to load anyway)");
    }
    return;
  }
  refuse_qwen_sliding(r);
  c.expert_features = r.integer("moe_intermediate_size");
  c.norm_topk_prob = r.boolean("norm_topk_prob", false);
  c.moe_layer_step = r.integer("decoder_sparse_step", 1);
  if (c.moe_layer_step < 1) dew::fail(r.source(), ": decoder_sparse_step is ", c.moe_layer_step, "; it must be >= 1");
  c.dense_layers = read_layer_list(r, "mlp_only_layers", c.num_layers);
  if (model_type == "qwen2_moe") {
    c.shared_expert_features = r.integer("shared_expert_intermediate_size");
    if (c.shared_expert_features <= 0) {
      dew::fail(r.source(), ": shared_expert_intermediate_size is ", c.shared_expert_features, "; Qwen2-MoE's shared expert needs a positive width");
    }
  }
}

void write_moe_fields(const nn::CausalTransformerConfig& c, const std::string& mt, Json& out) {
  if (c.num_experts <= 0) refuse(mt, "num_experts", "is 0; " + mt + " is a mixture of experts (export a dense model as llama, qwen3, ...)");
  out["num_experts_per_tok"] = c.experts_per_token;
  out["router_aux_loss_coef"] = c.router_aux_loss_coef;
  out["output_router_logits"] = false;
  // router_z_loss_coef is no field of these families: a training setting, left out (the model computes the same).
  if (mt == "mixtral") {
    if (!c.norm_topk_prob) refuse(mt, "norm_topk_prob", "is false; Mixtral renormalises the chosen experts' probabilities (export as qwen3_moe)");
    if (c.shared_expert_features > 0) refuse(mt, "shared_expert_features", "is set; Mixtral has no shared expert (export as qwen2_moe)");
    if (c.moe_layer_step != 1 || !c.dense_layers.empty()) {
      refuse(mt, c.dense_layers.empty() ? "moe_layer_step" : "dense_layers", "gives some layers a dense MLP; every Mixtral layer has experts (export as qwen3_moe)");
    }
    out["num_local_experts"] = c.num_experts;
    out["intermediate_size"] = c.resolved_expert_features();
    out["router_jitter_noise"] = 0.0;
    return;
  }
  if (mt == "qwen2_moe" && c.shared_expert_features <= 0) {
    refuse(mt, "shared_expert_features", "is 0; every Qwen2-MoE layer has a shared expert (export as qwen3_moe)");
  }
  if (mt == "qwen3_moe" && c.shared_expert_features > 0) refuse(mt, "shared_expert_features", "is set; Qwen3-MoE has no shared expert (export as qwen2_moe)");
  out["num_experts"] = c.num_experts;
  out["moe_intermediate_size"] = c.resolved_expert_features();
  if (mt == "qwen2_moe") out["shared_expert_intermediate_size"] = c.shared_expert_features;
  out["norm_topk_prob"] = c.norm_topk_prob;
  out["decoder_sparse_step"] = c.moe_layer_step;
  out["mlp_only_layers"] = c.dense_layers;
  out["use_sliding_window"] = false;
}

std::string hf_moe_model_type_for(const nn::CausalTransformerConfig& c) {
  if (c.shared_expert_features > 0) return "qwen2_moe";
  if (c.qk_norm || !c.norm_topk_prob || c.moe_layer_step != 1 || !c.dense_layers.empty()) return "qwen3_moe";
  return "mixtral";
}

}  // namespace dew::interop::detail
