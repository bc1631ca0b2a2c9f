#include "dew/interop/hf_llada.h"

#include <utility>
#include <vector>

#include "dew/core/error.h"
#include "dew/interop/hf_block_features.h"
#include "dew/interop/hf_config_reader.h"

namespace dew::interop {

namespace {

using Json = nlohmann::ordered_json;
using detail::HfConfigReader;
using nn::CausalTransformerConfig;

// An integer LLaDA spells its own way (d_model) that conversions sometimes spell as transformers does
// (hidden_size). Both present and different is refused: which one a reader takes would decide the model.
std::int64_t either_integer(const HfConfigReader& r, const std::string& llada, const std::string& hf, std::int64_t fallback) {
  if (r.has(llada) && r.has(hf) && r.integer(llada) != r.integer(hf)) {
    dew::fail(r.source(), ": ", llada, " is ", r.integer(llada), " but ", hf, " is ", r.integer(hf), "; they name the same size, make them agree");
  }
  return r.has(llada) ? r.integer(llada) : r.integer(hf, fallback);
}

// A switch that, on (or off, for `wanted` true), makes LLaDA compute something dew does not.
void require_flag(const HfConfigReader& r, const std::string& key, bool fallback, bool wanted, const std::string& why) {
  if (r.boolean(key, fallback) != wanted) {
    dew::fail(r.source(), ": ", key, " is ", r.boolean(key, fallback) ? "true" : "false",
              r.has(key) ? "" : " (LLaDAConfig's default; the field is absent)", "; ", why);
  }
}

void require_string(const HfConfigReader& r, const std::string& key, const std::string& fallback, const std::string& wanted,
                    const std::string& why) {
  auto value = r.string(key, fallback);
  if (value != wanted) {
    dew::fail(r.source(), ": ", key, " is '", value, "'", r.has(key) ? "" : " (LLaDAConfig's default; the field is absent)",
              "; ", why);
  }
}

// dew's module path inside a decoder layer <-> LLaDA's inside a block (modeling_llada.py's LLaDALlamaBlock).
const std::vector<std::pair<std::string, std::string>>& block_modules() {
  static const std::vector<std::pair<std::string, std::string>> map = {
      {"input_layernorm", "attn_norm"},         {"self_attn.q_proj", "q_proj"}, {"self_attn.k_proj", "k_proj"},
      {"self_attn.v_proj", "v_proj"},           {"self_attn.o_proj", "attn_out"},
      {"post_attention_layernorm", "ff_norm"},  {"mlp.gate_proj", "ff_proj"},   {"mlp.up_proj", "up_proj"},
      {"mlp.down_proj", "ff_out"},
  };
  return map;
}

// Top-level modules. LLaDA's head is transformer.ff_out, the same last name as a block's down projection.
const std::vector<std::pair<std::string, std::string>>& top_modules() {
  static const std::vector<std::pair<std::string, std::string>> map = {
      {"model.embed_tokens", "model.transformer.wte"}, {"model.norm", "model.transformer.ln_f"}, {"lm_head", "model.transformer.ff_out"}};
  return map;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// "PREFIX<digits>.REST" -> (digits, REST); nullopt when `name` is not of that shape.
std::optional<std::pair<std::string, std::string>> split_layer(const std::string& name, const std::string& prefix) {
  if (!starts_with(name, prefix)) return std::nullopt;
  auto dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size()) return std::nullopt;
  auto index = name.substr(prefix.size(), dot - prefix.size());
  if (index.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::pair{index, name.substr(dot + 1)};
}

// "MODULE.leaf" with MODULE in the `from` column of `map` -> the `to` column's MODULE + ".leaf".
std::optional<std::string> rename_module(const std::string& name, const std::vector<std::pair<std::string, std::string>>& map,
                                         bool dew_to_llada) {
  auto dot = name.rfind('.');
  if (dot == std::string::npos) return std::nullopt;
  auto module = name.substr(0, dot), leaf = name.substr(dot);
  for (const auto& [dew, llada] : map) {
    if (module == (dew_to_llada ? dew : llada)) return (dew_to_llada ? llada : dew) + leaf;
  }
  return std::nullopt;
}

[[noreturn]] void refuse(const std::string& field, const std::string& why) {
  dew::fail("cannot export as llada: model.", field, " ", why);
}

}  // namespace

CausalTransformerConfig llada_config_from_hf(const Json& config, const std::string& source) {
  HfConfigReader r(config, source);
  // What would change the computation away from a bidirectional Llama block, each refused by name. Defaults
  // are LLaDAConfig's (OLMo's ModelConfig), which LLaDA-8B's config.json overrides field by field.
  require_string(r, "block_type", "sequential", "llama",
                 "dew reads LLaDA's llama block (separate q/k/v and up projections, as LLaDA-8B has)");
  if (r.integer("block_group_size", 1) != 1) {
    dew::fail(source, ": block_group_size is ", r.integer("block_group_size"), "; dew reads blocks stored one by one (1)");
  }
  require_flag(r, "rope", false, true, "without rotary embeddings LLaDA adds learned absolute positions (wpe), which dew has not");
  require_flag(r, "alibi", false, false, "dew computes rotary positions, not ALiBi biases");
  require_flag(r, "attention_layer_norm", false, false, "LLaDA's q/k norm spans all heads at once; dew normalises per head");
  require_string(r, "layer_norm_type", "default", "rms", "dew's norms are RMSNorm (layer_norm_type 'rms')");
  require_flag(r, "layer_norm_with_affine", true, true, "dew's norms always have a weight");
  bool include_bias = r.boolean("include_bias", false);
  if (include_bias) dew::fail(source, ": include_bias is true; dew reads LLaDA's bias-free linear layers only");
  require_flag(r, "bias_for_layer_norm", include_bias, false, "dew's RMSNorm has no bias");
  require_flag(r, "include_qkv_bias", false, false, "dew reads LLaDA's bias-free q/k/v projections only");
  require_flag(r, "attention_bias", false, false, "dew reads LLaDA's bias-free projections only");
  require_flag(r, "input_emb_norm", false, false, "it scales the embeddings by sqrt(d_model), which LLaDA's export would not keep");
  require_flag(r, "scale_logits", false, false, "dew does not scale the logits by 1/sqrt(d_model)");
  require_flag(r, "multi_query_attention", false, false, "set n_kv_heads to 1 instead");
  if (r.has("rope_scaling")) dew::fail(source, ": rope_scaling is ", config["rope_scaling"].dump(), "; LLaDA's rotary embedding is unscaled");
  if (r.has("sliding_window") || r.boolean("use_sliding_window", false)) {
    dew::fail(source, ": sliding_window is set; LLaDA attends to the whole row on every layer");
  }
  // swiglu (the default) would split ff_proj's output in halves on top of the llama block's own gate.
  const std::string act_key = r.has("activation_type") || !r.has("hidden_act") ? "activation_type" : "hidden_act";
  require_string(r, act_key, "swiglu", "silu", "dew reads LLaDA's llama block with silu (silu(ff_proj(x)) * up_proj(x)), as LLaDA-8B has");

  CausalTransformerConfig c;
  c.vocab_size = r.integer("vocab_size", 50257);
  // embedding_size: absent = LLaDAConfig's 50304, null = vocab_size. The embedding and head have that many
  // rows and LLaDA returns every column as logits, so a padded embedding would change the output's shape.
  std::int64_t embedding_size = r.has("embedding_size") ? r.integer("embedding_size") : r.present("embedding_size") ? c.vocab_size : 50304;
  if (embedding_size != c.vocab_size) {
    dew::fail(source, ": embedding_size is ", embedding_size, r.present("embedding_size") ? "" : " (LLaDAConfig's default; the field is absent)",
              " but vocab_size is ", c.vocab_size, "; dew reads checkpoints whose embedding has vocab_size rows (LLaDA-8B: both 126464)");
  }
  c.emb_features = either_integer(r, "d_model", "hidden_size", 768);
  c.num_heads = either_integer(r, "n_heads", "num_attention_heads", 12);
  c.num_layers = either_integer(r, "n_layers", "num_hidden_layers", 12);
  if (c.num_heads <= 0 || c.emb_features % c.num_heads != 0) {
    dew::fail(source, ": d_model (", c.emb_features, ") must be a multiple of n_heads (", c.num_heads, "); LLaDA's heads are d_model / n_heads wide");
  }
  c.head_dim = c.emb_features / c.num_heads;
  if (r.has("head_dim") && r.integer("head_dim") != c.head_dim) {
    dew::fail(source, ": head_dim is ", r.integer("head_dim"), " but LLaDA's heads are d_model / n_heads = ", c.head_dim, " wide");
  }
  c.num_kv_heads = either_integer(r, "n_kv_heads", "num_key_value_heads", c.num_heads);  // null = n_heads
  bool sized = r.has("mlp_hidden_size") || r.has("intermediate_size");  // else mlp_ratio * d_model
  c.mlp_features = sized ? either_integer(r, "mlp_hidden_size", "intermediate_size", 0) : r.integer("mlp_ratio", 4) * c.emb_features;
  c.max_seq_len = either_integer(r, "max_sequence_length", "max_position_embeddings", 1024);
  c.norm_eps = r.number("rms_norm_eps", 1e-5);
  c.rope_theta = r.number("rope_theta", 10'000.0);
  c.tie_embeddings = r.has("weight_tying") ? r.boolean("weight_tying", true) : r.boolean("tie_word_embeddings", true);
  c.mlp = "swiglu";
  c.qk_norm = false;
  c.attention_bias = c.attention_output_bias = c.mlp_bias = false;
  c.causal = false;
  c.mask_token_id = detail::read_mask_token_id(r, c.vocab_size, "LLaDA");
  c.dtype = c.param_dtype = "float32";
  try {
    c.validate();
  } catch (const dew::Error& e) {
    dew::fail(source, ": the translated config is invalid: ", e.what());
  }
  return c;
}

Json llada_config_to_hf(const CausalTransformerConfig& c) {
  c.validate();
  detail::refuse_block_features(c, "llada", {});
  if (c.causal) refuse("causal", "is true; LLaDA attends both ways (export a causal model as llama, qwen2, ...)");
  if (c.mask_token_id < 0) refuse("mask_token_id", "is -1; a LLaDA checkpoint names its mask token (set model.mask_token_id)");
  if (c.shift_logits) refuse("shift_logits", "is true; LLaDA's logits at position i predict token i itself (export as dream)");
  if (c.mlp != "swiglu") refuse("mlp", "is " + c.mlp + "; LLaDA's MLP is silu-gated (swiglu)");
  if (c.qk_norm) refuse("qk_norm", "is true; LLaDA's llama block has no q/k norms");
  if (c.attention_bias || c.attention_output_bias) refuse("attention_bias", "is set; LLaDA's projections have no biases (export as dream for q/k/v biases)");
  if (c.mlp_bias) refuse("mlp_bias", "is true; LLaDA's MLP has no biases");
  if (c.norm_weight_offset != 0.0) refuse("norm_weight_offset", dew::str("is ", c.norm_weight_offset, "; LLaDA's RMSNorm scales by its weight"));
  if (c.embedding_scale != 1.0) refuse("embedding_scale", dew::str("is ", c.embedding_scale, "; LLaDA does not scale its embeddings"));
  if (c.sandwich_norms) refuse("sandwich_norms", "is true; LLaDA's block has two norms");
  if (c.attn_logit_softcap > 0) refuse("attn_logit_softcap", dew::str("is ", c.attn_logit_softcap, "; LLaDA has none"));
  if (c.final_logit_softcap > 0) refuse("final_logit_softcap", dew::str("is ", c.final_logit_softcap, "; LLaDA has none"));
  auto head_dim = c.resolved_head_dim();
  if (c.query_pre_attn_scalar > 0 && c.query_pre_attn_scalar != static_cast<double>(head_dim)) {
    refuse("query_pre_attn_scalar", dew::str("is ", c.query_pre_attn_scalar, "; LLaDA scales by head_dim^-0.5"));
  }
  if (head_dim * c.num_heads != c.emb_features) {
    refuse("head_dim", dew::str("is ", head_dim, "; LLaDA's heads are emb_features / num_heads = ", c.emb_features / c.num_heads, " wide"));
  }
  if (c.rope_scaling.type != "none") refuse("rope_scaling.type", "is " + c.rope_scaling.type + "; LLaDA's rotary embedding is unscaled");
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    if (c.window_of_layer(i) > 0) refuse("kinds", dew::str("give layer ", i, " a sliding window; LLaDA attends to the whole row"));
    if (c.kind_rope_theta_of_layer(i) > 0) refuse("kinds", dew::str("give layer ", i, " its own rope_theta; LLaDA has one rotary base"));
  }

  // LLaDA-8B-Base's fields (the ones its modeling code reads), in its order.
  Json out;
  out["activation_type"] = "silu";
  out["alibi"] = false;
  out["alibi_bias_max"] = 8.0;
  out["architectures"] = Json::array({"LLaDAModelLM"});
  out["attention_dropout"] = 0.0;
  out["attention_layer_norm"] = false;
  out["attention_layer_norm_with_affine"] = true;
  out["bias_for_layer_norm"] = false;
  out["block_group_size"] = 1;
  out["block_type"] = "llama";
  out["d_model"] = c.emb_features;
  out["embedding_dropout"] = 0.0;
  out["embedding_size"] = c.vocab_size;
  out["flash_attention"] = false;
  out["include_bias"] = false;
  out["include_qkv_bias"] = false;
  out["input_emb_norm"] = false;
  out["layer_norm_type"] = "rms";
  out["layer_norm_with_affine"] = true;
  out["mask_token_id"] = c.mask_token_id;
  out["max_sequence_length"] = c.max_seq_len;
  out["mlp_hidden_size"] = c.resolved_mlp_features();
  out["model_type"] = "llada";
  out["multi_query_attention"] = nullptr;
  out["n_heads"] = c.num_heads;
  out["n_kv_heads"] = c.resolved_kv_heads();
  out["n_layers"] = c.num_layers;
  out["residual_dropout"] = 0.0;
  out["rms_norm_eps"] = c.norm_eps;
  out["rope"] = true;
  out["rope_full_precision"] = true;
  out["rope_theta"] = c.rope_theta;
  out["scale_logits"] = false;
  out["use_cache"] = false;
  out["vocab_size"] = c.vocab_size;
  out["weight_tying"] = c.tie_embeddings;
  return out;
}

std::string llada_tensor_name(const std::string& dew_name) {
  if (auto layer = split_layer(dew_name, "model.layers.")) {
    if (auto rest = rename_module(layer->second, block_modules(), true)) return "model.transformer.blocks." + layer->first + "." + *rest;
  } else if (auto top = rename_module(dew_name, top_modules(), true)) {
    return *top;
  }
  dew::fail("cannot export as llada: parameter '", dew_name, "' has no place in LLaDA's llama block");
}

std::optional<std::string> dew_tensor_name_from_llada(const std::string& llada_name) {
  if (auto block = split_layer(llada_name, "model.transformer.blocks.")) {
    auto rest = rename_module(block->second, block_modules(), false);
    if (rest) return "model.layers." + block->first + "." + *rest;
    return std::nullopt;
  }
  return rename_module(llada_name, top_modules(), false);
}

}  // namespace dew::interop
