#include "dew/interop/hf_gpt2.h"

#include "dew/core/error.h"
#include "dew/interop/hf_block_features.h"
#include "dew/interop/hf_config_reader.h"

namespace dew::interop {

namespace {

using Json = nlohmann::ordered_json;
using detail::HfConfigReader;
using nn::CausalTransformerConfig;

// transformers' ACT2FN names of the ungated GELUs: the tanh approximation (gelu_new, gelu_fast and
// gelu_pytorch_tanh compute the same function) or the exact erf one (gelu).
std::string ungated_mlp(const HfConfigReader& r, const std::string& field, const std::string& fallback) {
  auto act = r.string(field, fallback);
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast") return "gelu";
  if (act == "gelu") return "gelu_erf";
  dew::fail(r.source(), ": ", field, " is '", act, "'; dew computes gelu (exact) and gelu_new / gelu_pytorch_tanh / gelu_fast (tanh)");
}

void finish(CausalTransformerConfig& c, const std::string& source) {
  c.dtype = c.param_dtype = "float32";
  try {
    c.validate();
  } catch (const dew::Error& e) {
    dew::fail(source, ": the translated config is invalid: ", e.what());
  }
}

[[noreturn]] void refuse(const std::string& mt, const std::string& field, const std::string& why) {
  dew::fail("cannot export as ", mt, ": model.", field, " ", why);
}

// What GPT-2 and GPT-NeoX share and the Llama table does not: LayerNorm, biases everywhere, an ungated
// GELU MLP, full multi-head attention, a causal decoder with no Gemma or sliding-window features.
void require_gpt_block(const CausalTransformerConfig& c, const std::string& mt) {
  if (c.norm != "layernorm") refuse(mt, "norm", "is " + c.norm + "; " + mt + "'s norms are LayerNorm with a bias");
  if (c.mlp != "gelu" && c.mlp != "gelu_erf") refuse(mt, "mlp", "is " + c.mlp + "; " + mt + "'s MLP is ungated (gelu or gelu_erf)");
  if (!c.mlp_bias) refuse(mt, "mlp_bias", "is false; " + mt + "'s MLP has biases");
  if (c.resolved_kv_heads() != c.num_heads) refuse(mt, "num_kv_heads", dew::str("is ", c.resolved_kv_heads(), "; ", mt, " has no grouped-query attention"));
  if (c.resolved_head_dim() * c.num_heads != c.emb_features) refuse(mt, "head_dim", "is not emb_features / num_heads");
  if (c.qk_norm) refuse(mt, "qk_norm", "is true; " + mt + " has no q/k norms");
  if (c.sandwich_norms) refuse(mt, "sandwich_norms", "is true");
  if (c.norm_weight_offset != 0.0 || c.embedding_scale != 1.0) refuse(mt, "norm_weight_offset", "or embedding_scale is set (Gemma's)");
  if (c.attn_logit_softcap > 0 || c.final_logit_softcap > 0) refuse(mt, "attn_logit_softcap", "or final_logit_softcap is set");
  if (c.query_pre_attn_scalar > 0 && c.query_pre_attn_scalar != static_cast<double>(c.resolved_head_dim())) {
    refuse(mt, "query_pre_attn_scalar", "is set; " + mt + " scales by head_dim^-0.5");
  }
  if (!c.causal) refuse(mt, "causal", "is false; " + mt + " is a causal decoder");
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    if (c.window_of_layer(i) > 0 || c.kind_rope_theta_of_layer(i) > 0) refuse(mt, "kinds", dew::str("give layer ", i, " its own window or rotary base"));
  }
}

}  // namespace

CausalTransformerConfig gpt2_config_from_hf(const Json& config, const std::string& source) {
  HfConfigReader r(config, source);
  if (r.boolean("add_cross_attention", false)) dew::fail(source, ": add_cross_attention is true; dew reads GPT-2 as a decoder-only model");
  if (r.boolean("scale_attn_by_inverse_layer_idx", false)) {
    dew::fail(source, ": scale_attn_by_inverse_layer_idx is true; dew scales every layer's scores by head_dim^-0.5");
  }
  if (!r.boolean("scale_attn_weights", true)) dew::fail(source, ": scale_attn_weights is false; dew scales the scores by head_dim^-0.5");
  // Inert: resid_pdrop, embd_pdrop, attn_pdrop (dew trains without dropout; published GPT-2s set 0.1),
  // reorder_and_upcast_attn (float32 scores, as dew computes them), summary_* (the double-heads model's
  // classifier), initializer_range, use_cache, bos/eos/pad ids (generation_config's business).
  CausalTransformerConfig c;
  c.vocab_size = r.integer("vocab_size", 50257);
  c.emb_features = r.integer("n_embd", 768);
  c.num_layers = r.integer("n_layer", 12);
  c.num_heads = r.integer("n_head", 12);
  if (c.num_heads <= 0 || c.emb_features % c.num_heads != 0) {
    dew::fail(source, ": n_embd (", c.emb_features, ") must be a multiple of n_head (", c.num_heads, ")");
  }
  c.head_dim = c.emb_features / c.num_heads;
  c.mlp_features = r.integer("n_inner", 4 * c.emb_features);
  c.max_seq_len = r.integer("n_positions", 1024);
  c.norm_eps = r.number("layer_norm_epsilon", 1e-5);
  c.tie_embeddings = r.boolean("tie_word_embeddings", true);
  c.mlp = ungated_mlp(r, "activation_function", "gelu_new");
  c.norm = "layernorm";
  c.positions = "learned";
  c.attention_bias = c.attention_output_bias = c.mlp_bias = true;
  c.qk_norm = false;
  finish(c, source);
  return c;
}

Json gpt2_config_to_hf(const CausalTransformerConfig& c) {
  c.validate();
  const std::string mt = "gpt2";
  detail::refuse_block_features(c, mt, {.layernorm = true, .learned_positions = true});
  if (c.positions != "learned") refuse(mt, "positions", "is " + c.positions + "; GPT-2 learns absolute positions");
  require_gpt_block(c, mt);
  if (!c.attention_bias || !c.attention_output_bias) refuse(mt, "attention_bias", "or attention_output_bias is false; GPT-2's projections all have biases");
  Json out;
  out["architectures"] = Json::array({"GPT2LMHeadModel"});
  out["model_type"] = mt;
  out["vocab_size"] = c.vocab_size;
  out["n_positions"] = c.max_seq_len;
  out["n_embd"] = c.emb_features;
  out["n_layer"] = c.num_layers;
  out["n_head"] = c.num_heads;
  out["n_inner"] = c.resolved_mlp_features();
  out["activation_function"] = c.mlp == "gelu" ? "gelu_new" : "gelu";
  out["resid_pdrop"] = 0.0;
  out["embd_pdrop"] = 0.0;
  out["attn_pdrop"] = 0.0;
  out["layer_norm_epsilon"] = c.norm_eps;
  out["scale_attn_weights"] = true;
  out["scale_attn_by_inverse_layer_idx"] = false;
  out["reorder_and_upcast_attn"] = false;
  out["tie_word_embeddings"] = c.tie_embeddings;
  return out;
}

CausalTransformerConfig gpt_neox_config_from_hf(const Json& config, const std::string& source) {
  HfConfigReader r(config, source);
  for (const char* dropout : {"attention_dropout", "hidden_dropout"}) {
    if (r.number(dropout, 0.0) != 0.0) {
      dew::fail(source, ": ", dropout, " is ", r.number(dropout), "; dew trains without dropout, so fine-tuning would differ (set it to 0.0 to load anyway)");
    }
  }
  // Inert: classifier_dropout (the classification heads'), initializer_range, use_cache, bos/eos/pad ids.
  CausalTransformerConfig c;
  c.vocab_size = r.integer("vocab_size", 50432);
  c.emb_features = r.integer("hidden_size", 6144);
  c.num_layers = r.integer("num_hidden_layers", 44);
  c.num_heads = r.integer("num_attention_heads", 64);
  if (c.num_heads <= 0 || c.emb_features % c.num_heads != 0) {
    dew::fail(source, ": hidden_size (", c.emb_features, ") must be a multiple of num_attention_heads (", c.num_heads, ")");
  }
  c.head_dim = c.emb_features / c.num_heads;
  c.mlp_features = r.integer("intermediate_size", 24576);
  c.max_seq_len = r.integer("max_position_embeddings", 2048);
  c.norm_eps = r.number("layer_norm_eps", 1e-5);
  c.tie_embeddings = r.boolean("tie_word_embeddings", false);
  c.parallel_residual = r.boolean("use_parallel_residual", true);
  c.mlp = ungated_mlp(r, "hidden_act", "gelu");
  c.norm = "layernorm";
  c.attention_bias = c.attention_output_bias = r.boolean("attention_bias", true);
  c.mlp_bias = true;
  c.qk_norm = false;
  // Rotary: transformers 5's rope_parameters (rope_theta, partial_rotary_factor, rope_type), or the older
  // rotary_emb_base / rotary_pct / rope_scaling.
  double partial = r.number("rotary_pct", 0.25);
  c.rope_theta = r.number("rotary_emb_base", 10000.0);
  const Json* params = r.get("rope_parameters");
  if (!params) params = r.get("rope_scaling");
  if (params) {
    if (!params->is_object()) dew::fail(source, ": rope_parameters is ", params->dump(), "; expected an object");
    HfConfigReader p(*params, source);
    partial = p.number("partial_rotary_factor", partial);
    c.rope_theta = p.number("rope_theta", c.rope_theta);
    Json scaling = *params;
    scaling.erase("partial_rotary_factor");
    c.rope_scaling = detail::read_rope_scaling(scaling, r.get("rope_parameters") ? "rope_parameters" : "rope_scaling", source);
  }
  c.rotary_dim = static_cast<std::int64_t>(static_cast<double>(c.head_dim) * partial);  // transformers' int(head_size * factor)
  if (c.rotary_dim <= 0) dew::fail(source, ": partial_rotary_factor (rotary_pct) is ", partial, "; dew needs at least two rotating features per head");
  finish(c, source);
  return c;
}

Json gpt_neox_config_to_hf(const CausalTransformerConfig& c) {
  c.validate();
  const std::string mt = "gpt_neox";
  detail::refuse_block_features(c, mt, {.layernorm = true, .partial_rotary = true, .parallel_residual = true});
  require_gpt_block(c, mt);
  if (c.positions != "rotary") refuse(mt, "positions", "is " + c.positions + "; GPT-NeoX's positions are rotary");
  if (c.attention_bias != c.attention_output_bias) refuse(mt, "attention_output_bias", "differs from attention_bias; GPT-NeoX has one switch for both");
  Json out;
  out["architectures"] = Json::array({"GPTNeoXForCausalLM"});
  out["model_type"] = mt;
  out["vocab_size"] = c.vocab_size;
  out["hidden_size"] = c.emb_features;
  out["num_hidden_layers"] = c.num_layers;
  out["num_attention_heads"] = c.num_heads;
  out["intermediate_size"] = c.resolved_mlp_features();
  out["hidden_act"] = c.mlp == "gelu" ? "gelu_new" : "gelu";
  out["max_position_embeddings"] = c.max_seq_len;
  out["layer_norm_eps"] = c.norm_eps;
  out["tie_word_embeddings"] = c.tie_embeddings;
  out["use_parallel_residual"] = c.parallel_residual;
  out["attention_bias"] = c.attention_bias;
  out["attention_dropout"] = 0.0;
  out["hidden_dropout"] = 0.0;
  Json rope = {{"rope_type", "default"}, {"rope_theta", c.rope_theta}};
  if (c.rope_scaling.type == "linear") rope = {{"rope_type", "linear"}, {"rope_theta", c.rope_theta}, {"factor", c.rope_scaling.factor}};
  if (c.rope_scaling.type == "llama3") refuse(mt, "rope_scaling.type", "is llama3; export it as llama");
  if (c.rope_scaling.type == "longrope") refuse(mt, "rope_scaling.type", "is longrope; export it as phi3");
  rope["partial_rotary_factor"] = static_cast<double>(c.resolved_rotary_dim()) / static_cast<double>(c.resolved_head_dim());
  out["rope_parameters"] = rope;
  return out;
}

}  // namespace dew::interop
