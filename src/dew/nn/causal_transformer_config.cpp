#include "dew/nn/causal_transformer_config.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "dew/core/error.h"

namespace dew::nn {

std::int64_t CausalTransformerConfig::window_of_layer(std::int64_t layer) const {
  if (layer_types.empty()) return 0;
  const auto& type = layer_types.at(static_cast<std::size_t>(layer));
  auto it = kinds.find(type);
  return it == kinds.end() ? 0 : it->second.window;
}

double CausalTransformerConfig::kind_rope_theta_of_layer(std::int64_t layer) const {
  if (layer_types.empty()) return 0.0;
  auto it = kinds.find(layer_types.at(static_cast<std::size_t>(layer)));
  return it == kinds.end() ? 0.0 : it->second.rope_theta;
}

bool CausalTransformerConfig::is_moe_layer(std::int64_t layer) const {
  if (num_experts <= 0 || moe_layer_step <= 0 || (layer + 1) % moe_layer_step != 0) return false;
  return std::find(dense_layers.begin(), dense_layers.end(), layer) == dense_layers.end();
}

namespace {

// longrope's lists: one positive finite divisor per rotating pair, and the boundary and scale they need.
void validate_longrope(const RopeScaling& s, std::int64_t rotary_dim) {
  const auto pairs = static_cast<std::size_t>(rotary_dim / 2);
  for (const auto* list : {&s.short_factor, &s.long_factor}) {
    const char* name = list == &s.short_factor ? "short_factor" : "long_factor";
    if (list->size() != pairs) {
      dew::fail("model.rope_scaling.", name, " has ", list->size(), " values; longrope needs one per rotating pair of a head: ", pairs);
    }
    for (double v : *list) {
      if (!(v > 0) || std::isinf(v)) dew::fail("model.rope_scaling.", name, " holds ", v, "; its divisors must be positive and finite");
    }
  }
  if (s.original_max_position_embeddings <= 0) {
    dew::fail("model.rope_scaling.original_max_position_embeddings is ", s.original_max_position_embeddings, "; longrope needs it positive");
  }
  if (!(s.attention_factor > 0) || std::isinf(s.attention_factor)) {
    dew::fail("model.rope_scaling.attention_factor is ", s.attention_factor, "; use a finite number above 0");
  }
}

// The mixture-of-experts fields; a dense config (num_experts = 0) leaves the rest unread.
void validate_moe(const CausalTransformerConfig& c) {
  if (c.num_experts < 0) dew::fail("model.num_experts must be >= 0 (0 = dense MLPs), got ", c.num_experts);
  if (c.num_experts == 0) return;
  if (c.experts_per_token < 1 || c.experts_per_token > c.num_experts) {
    dew::fail("model.experts_per_token is ", c.experts_per_token, "; the router picks between 1 and model.num_experts = ", c.num_experts,
              " experts per token");
  }
  if (c.expert_features < 0) dew::fail("model.expert_features must be >= 0 (0 = mlp_features), got ", c.expert_features);
  if (c.shared_expert_features < 0) dew::fail("model.shared_expert_features must be >= 0 (0 = no shared expert), got ", c.shared_expert_features);
  if (c.moe_layer_step < 1) dew::fail("model.moe_layer_step must be >= 1 (1 = every layer has experts), got ", c.moe_layer_step);
  for (auto layer : c.dense_layers) {
    if (layer < 0 || layer >= c.num_layers) {
      dew::fail("model.dense_layers names layer ", layer, "; layers are 0 .. ", c.num_layers - 1, " (model.num_layers)");
    }
  }
  if (c.mlp != "swiglu" && c.mlp != "geglu") {
    dew::fail("model.mlp is '", c.mlp, "' with model.num_experts = ", c.num_experts, "; experts are gated MLPs (swiglu or geglu)");
  }
  if (c.mlp_bias) dew::fail("model.mlp_bias is true with model.num_experts = ", c.num_experts, "; experts have no biases");
  for (auto [value, field] : {std::pair{c.router_aux_loss_coef, "router_aux_loss_coef"}, std::pair{c.router_z_loss_coef, "router_z_loss_coef"}}) {
    if (!(value >= 0) || std::isinf(value)) dew::fail("model.", field, " must be >= 0 and finite, got ", value);
  }
}
}  // namespace

void CausalTransformerConfig::validate() const {
  auto positive = [](std::int64_t value, const char* field) {
    if (value <= 0) dew::fail("model.", field, " must be positive, got ", value);
  };
  // Real-valued fields: written as !(x > 0) so that NaN, for which every comparison is false, is refused too.
  auto finite_positive = [](double value, const std::string& field) {
    if (!(value > 0) || std::isinf(value)) dew::fail("model.", field, " must be positive, got ", value, "; use a finite number above 0");
  };
  auto finite_non_negative = [](double value, const std::string& field) {
    if (!(value >= 0) || std::isinf(value)) dew::fail("model.", field, " must be >= 0 and finite, got ", value);
  };
  positive(vocab_size, "vocab_size");
  positive(emb_features, "emb_features");
  positive(num_layers, "num_layers");
  positive(num_heads, "num_heads");
  positive(max_seq_len, "max_seq_len");
  if (mask_token_id >= 0 && causal) {
    dew::fail("model.mask_token_id is ", mask_token_id, " but model.causal is true; a masked-diffusion model reads the whole row: "
              "set model.causal=false, or mask_token_id=-1 for an autoregressive decoder");
  }
  if (shift_logits && causal) {
    dew::fail("model.shift_logits is true but model.causal is true; the shift is a masked-diffusion model's (Dream's): "
              "set model.causal=false or shift_logits=false");
  }
  if (mask_token_id < -1 || mask_token_id >= vocab_size) {
    dew::fail("model.mask_token_id is ", mask_token_id, " but token ids are in [0, ", vocab_size,
              ") (model.vocab_size); use an id inside the vocabulary, or -1 for none");
  }
  if (num_kv_heads < 0) dew::fail("model.num_kv_heads must be >= 0, got ", num_kv_heads);
  if (head_dim < 0) dew::fail("model.head_dim must be >= 0 (0 = emb_features / num_heads), got ", head_dim);
  if (mlp_features < 0) dew::fail("model.mlp_features must be >= 0 (0 = 4 * emb_features), got ", mlp_features);
  if (head_dim == 0 && emb_features % num_heads != 0) {
    dew::fail("model.emb_features (", emb_features, ") is not divisible by model.num_heads (", num_heads,
              "); change one, or set model.head_dim");
  }
  if (num_heads % resolved_kv_heads() != 0) {
    dew::fail("model.num_heads (", num_heads, ") must be a multiple of model.num_kv_heads (", resolved_kv_heads(), ")");
  }
  if (positions != "rotary" && positions != "learned") dew::fail("model.positions is '", positions, "'; use rotary or learned");
  if (positions == "rotary" && resolved_head_dim() % 2 != 0) {
    dew::fail("the head dimension must be even for rotary positions, got ", resolved_head_dim());
  }
  if (rotary_dim < 0 || rotary_dim > resolved_head_dim() || rotary_dim % 2 != 0) {
    dew::fail("model.rotary_dim is ", rotary_dim, "; use an even number of features in [0, head_dim = ", resolved_head_dim(), "] (0 = all)");
  }
  if (mlp != "swiglu" && mlp != "geglu" && mlp != "gelu" && mlp != "gelu_erf") {
    dew::fail("model.mlp is '", mlp, "'; use swiglu, geglu, gelu or gelu_erf");
  }
  if (norm != "rmsnorm" && norm != "layernorm") dew::fail("model.norm is '", norm, "'; use rmsnorm or layernorm");
  if (!pre_norms && !sandwich_norms) {
    dew::fail("model.pre_norms is false without model.sandwich_norms: the block would have no norm at all; set sandwich_norms=true");
  }
  if (!pre_norms && parallel_residual) dew::fail("model.parallel_residual needs model.pre_norms (each branch reads a normed input)");
  if (sandwich_norms && parallel_residual) dew::fail("model.parallel_residual and model.sandwich_norms together are not a block dew computes");
  if (!layer_types.empty() && static_cast<std::int64_t>(layer_types.size()) != num_layers) {
    dew::fail("model.layer_types has ", layer_types.size(), " entries but model.num_layers is ", num_layers);
  }
  for (const auto& type : layer_types) {
    if (type != "full_attention" && !kinds.count(type)) {
      dew::fail("model.layer_types names '", type, "', which model.kinds does not define; add model.kinds.", type,
                " = {\"window\": N} or use full_attention");
    }
  }
  for (const auto& [name, kind] : kinds) {
    if (kind.window < 0) dew::fail("model.kinds.", name, ".window must be >= 0, got ", kind.window);
    finite_non_negative(kind.rope_theta, "kinds." + name + ".rope_theta");
  }
  for (const auto* field : {&dtype, &param_dtype, &residual_dtype}) {
    if (*field != "float32" && *field != "bfloat16" && *field != "float16") {
      dew::fail("model.", field == &dtype ? "dtype" : field == &param_dtype ? "param_dtype" : "residual_dtype", " is '",
                *field, "'; use float32, bfloat16 or float16");
    }
  }
  finite_positive(rope_theta, "rope_theta");
  finite_positive(norm_eps, "norm_eps");  // RMSNorm divides by sqrt(mean(x^2) + norm_eps)
  if (!std::isfinite(embedding_scale)) dew::fail("model.embedding_scale must be finite, got ", embedding_scale);
  if (!std::isfinite(norm_weight_offset)) dew::fail("model.norm_weight_offset must be finite, got ", norm_weight_offset);
  if (rope_scaling.type != "none" && rope_scaling.type != "linear" && rope_scaling.type != "llama3" && rope_scaling.type != "longrope") {
    dew::fail("model.rope_scaling.type is '", rope_scaling.type, "'; use none, linear, llama3 or longrope");
  }
  if (rope_scaling.type == "longrope") validate_longrope(rope_scaling, resolved_rotary_dim());
  if (rope_scaling.type != "none") finite_positive(rope_scaling.factor, "rope_scaling.factor");
  if (rope_scaling.type == "llama3" && (!(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor) ||
                                        !(rope_scaling.low_freq_factor > 0) || std::isinf(rope_scaling.high_freq_factor) || rope_scaling.original_max_position_embeddings <= 0)) {
    dew::fail("model.rope_scaling for llama3 needs 0 < low_freq_factor < high_freq_factor and a positive "
              "original_max_position_embeddings; got low_freq_factor ", rope_scaling.low_freq_factor, ", high_freq_factor ",
              rope_scaling.high_freq_factor, ", original_max_position_embeddings ", rope_scaling.original_max_position_embeddings);
  }
  finite_positive(residual_multiplier, "residual_multiplier");
  finite_positive(logits_scaling, "logits_scaling");
  finite_non_negative(attention_scale, "attention_scale");
  if (attention_scale > 0 && query_pre_attn_scalar > 0) {
    dew::fail("model.attention_scale and model.query_pre_attn_scalar both set the attention scale; set one of them");
  }
  finite_non_negative(attn_logit_softcap, "attn_logit_softcap");
  finite_non_negative(query_pre_attn_scalar, "query_pre_attn_scalar");
  finite_non_negative(final_logit_softcap, "final_logit_softcap");
  validate_moe(*this);
}

}  // namespace dew::nn
