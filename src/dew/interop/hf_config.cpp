#include "dew/interop/hf_config.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "dew/core/error.h"
#include "dew/interop/hf_block_features.h"
#include "dew/interop/hf_config_reader.h"
#include "dew/interop/hf_gpt2.h"
#include "dew/interop/hf_llada.h"
#include "dew/interop/hf_moe_config.h"
#include "dew/interop/hf_quantization.h"
#include "dew/interop/hf_rope_config.h"

namespace dew::interop {


namespace {

using Json = nlohmann::ordered_json;
using nn::CausalTransformerConfig;

// What each family's transformers modeling code does with the fields dew translates.
enum class AttentionBias { FromConfig, QkvOnly, QkvField, None };  // attention_bias -> q/k/v/o; Qwen2: q/k/v always; Qwen2-MoE: q/k/v per qkv_bias; Mistral: none
enum class Sliding {
  None,                  // llama, gemma: no sliding window at all
  AllLayers,             // mistral: sliding_window, when set, on every layer
  AfterMaxWindowLayers,  // qwen2/qwen3: use_sliding_window; layers >= max_window_layers (or layer_types) slide
  LayerTypes,            // gemma2/gemma3: layer_types, else every pattern-th layer full, the others sliding
};

// The blocks that differ from the Llama table's in one more way each.
enum class Variant {
  plain,
  phi3,     // fused qkv_proj / gate_up_proj (hf_tensor_layout.h), partial rotary, resid/embd dropouts
  olmo2,    // norms after each sublayer only, q/k norms over the whole projection
  granite,  // embedding, residual, attention and logits multipliers
};

struct Family {
  std::string model_type, architecture;
  bool default_tied;
  std::string activation_field;
  AttentionBias bias;
  bool mlp_bias;  // reads mlp_bias (llama)
  Sliding sliding;
  int sliding_pattern;  // LayerTypes: layer i is full when (i + 1) % pattern == 0
  bool qk_norm;
  bool gemma;     // RMSNorm scales by (1 + weight); embeddings scaled by sqrt(hidden_size)
  bool sandwich;  // post_attention / pre_feedforward / post_feedforward norms
  bool softcaps;  // attn_logit_softcapping, final_logit_softcapping, query_pre_attn_scalar
  bool local_rope;  // per-layer-type rope (rope_local_base_freq)
  bool masked_diffusion = false;  // bidirectional attention and a mask_token_id (Dream)
  std::string spelled = "";       // config.json's model_type where it differs from the family's name ("Dream")
  Variant variant = Variant::plain;
  bool moe = false;  // a mixture of experts: hf_moe_config.h reads and writes its fields
};

const std::vector<Family>& families() {
  static const std::vector<Family> all = {
      {"llama", "LlamaForCausalLM", false, "hidden_act", AttentionBias::FromConfig, true, Sliding::None, 0, false, false, false, false, false},
      {"mistral", "MistralForCausalLM", false, "hidden_act", AttentionBias::None, false, Sliding::AllLayers, 0, false, false, false, false, false},
      {"qwen2", "Qwen2ForCausalLM", false, "hidden_act", AttentionBias::QkvOnly, false, Sliding::AfterMaxWindowLayers, 0, false, false, false, false, false},
      {"qwen3", "Qwen3ForCausalLM", false, "hidden_act", AttentionBias::FromConfig, false, Sliding::AfterMaxWindowLayers, 0, true, false, false, false, false},
      {"gemma", "GemmaForCausalLM", true, "hidden_act", AttentionBias::FromConfig, false, Sliding::None, 0, false, true, false, false, false},
      {"gemma2", "Gemma2ForCausalLM", true, "hidden_activation", AttentionBias::FromConfig, false, Sliding::LayerTypes, 2, false, true, true, true, false},
      {"gemma3_text", "Gemma3ForCausalLM", true, "hidden_activation", AttentionBias::FromConfig, false, Sliding::LayerTypes, 6, true, true, true, true, true},
      // Dream-v0 (modeling_dream.py): Qwen2's block and names with bidirectional attention, never sliding.
      {"dream", "DreamModel", false, "hidden_act", AttentionBias::QkvOnly, false, Sliding::None, 0, false, false, false, false, false, true, "Dream"},
      {"phi3", "Phi3ForCausalLM", false, "hidden_act", AttentionBias::None, false, Sliding::AllLayers, 0, false, false, false, false, false, false, "", Variant::phi3},
      {"olmo2", "Olmo2ForCausalLM", false, "hidden_act", AttentionBias::FromConfig, false, Sliding::None, 0, true, false, true, false, false, false, "", Variant::olmo2},
      {"granite", "GraniteForCausalLM", false, "hidden_act", AttentionBias::FromConfig, true, Sliding::None, 0, false, false, false, false, false, false, "", Variant::granite},
      // Mixtures of experts: Mistral's, Qwen2's (q/k/v biases per qkv_bias) and Qwen3's blocks with experts.
      {"mixtral", "MixtralForCausalLM", false, "hidden_act", AttentionBias::None, false, Sliding::AllLayers, 0, false, false, false, false, false, false, "", Variant::plain, true},
      {"qwen2_moe", "Qwen2MoeForCausalLM", false, "hidden_act", AttentionBias::QkvField, false, Sliding::None, 0, false, false, false, false, false, false, "", Variant::plain, true},
      {"qwen3_moe", "Qwen3MoeForCausalLM", false, "hidden_act", AttentionBias::FromConfig, false, Sliding::None, 0, true, false, false, false, false, false, "", Variant::plain, true},
  };
  return all;
}

const Family& family_named(const std::string& model_type, const std::string& source) {
  for (const auto& f : families()) {
    if (f.model_type == model_type || (!f.spelled.empty() && f.spelled == model_type)) return f;
  }
  std::string known;
  for (const auto& name : hf_model_types()) known += (known.empty() ? "" : ", ") + name;
  dew::fail(source, ": model_type '", model_type, "' is not a decoder family dew computes; it reads ", known);
}

using Reader = detail::HfConfigReader;

using detail::read_rope;
using detail::read_rope_scaling;
using detail::take_longrope;
using detail::take_partial_rotary;

detail::BlockFeatures features_of(Variant variant) {
  switch (variant) {
    case Variant::phi3: return {.partial_rotary = true};
    case Variant::olmo2: return {.post_norms_only = true, .whole_projection_qk_norm = true};
    case Variant::granite: return {.multipliers = true};
    case Variant::plain: break;
  }
  return {};
}

// Fields of a variant that refuse a value dew does not compute, read before the translation.
void read_variant_fields(const Reader& r, Variant variant) {
  if (variant != Variant::phi3) return;
  for (const char* dropout : {"resid_pdrop", "embd_pdrop"}) {
    if (r.number(dropout, 0.0) != 0.0) {
      dew::fail(r.source(), ": ", dropout, " is ", r.number(dropout), "; dew trains without dropout, so fine-tuning would differ (set it to 0.0 to load anyway)");
    }
  }
  // Inert without longrope: original_max_position_embeddings (take_longrope reads it).
}

// The variant's block, on top of the table's translation.
void apply_variant(const Reader& r, Variant variant, CausalTransformerConfig& c) {
  switch (variant) {
    case Variant::olmo2:  // Olmo2DecoderLayer: x + post_attention_layernorm(attn(x)), then the same around the MLP
      c.sandwich_norms = true;
      c.pre_norms = false;
      c.qk_norm = true;
      c.qk_norm_per_head = false;
      break;
    case Variant::granite:
      c.embedding_scale = r.number("embedding_multiplier", 1.0);
      c.residual_multiplier = r.number("residual_multiplier", 1.0);
      c.attention_scale = r.number("attention_multiplier", 1.0);
      c.logits_scaling = r.number("logits_scaling", 1.0);
      break;
    case Variant::phi3:
    case Variant::plain: break;
  }
}

std::string activation_to_mlp(const std::string& act, const std::string& field, const std::string& source) {
  if (act == "silu" || act == "swish") return "swiglu";
  if (act == "gelu_pytorch_tanh" || act == "gelu_new") return "geglu";
  dew::fail(source, ": ", field, " is '", act, "'; dew's gated MLP computes silu or gelu_pytorch_tanh (gelu_new)");
}

std::vector<std::string> read_layer_types(const Reader& r, std::int64_t layers) {
  const Json* types = r.get("layer_types");
  if (!types) return {};
  if (!types->is_array() || static_cast<std::int64_t>(types->size()) != layers) {
    dew::fail(r.source(), ": layer_types must list one type per layer (", layers, "), got ", types->dump());
  }
  std::vector<std::string> out;
  for (const auto& t : *types) {
    if (!t.is_string() || (t != "full_attention" && t != "sliding_attention")) {
      dew::fail(r.source(), ": layer_types has ", t.dump(), "; dew computes full_attention and sliding_attention layers");
    }
    out.push_back(t.get<std::string>());
  }
  return out;
}

void set_sliding(CausalTransformerConfig& c, std::vector<std::string> types, std::int64_t window, double kind_theta) {
  bool any = std::find(types.begin(), types.end(), "sliding_attention") != types.end();
  if (!any || window <= 0) {
    if (kind_theta <= 0) return;  // every layer full: dew's default
  }
  c.layer_types = std::move(types);
  c.kinds["sliding_attention"] = nn::LayerKind{window > 0 ? window : 0, kind_theta};
}

}  // namespace

const std::vector<std::string>& hf_model_types() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& f : families()) out.push_back(f.model_type);
    out.push_back("llada");  // its own spelling and tensor names: hf_llada.h
    out.push_back("gpt2");   // their own spellings and blocks: hf_gpt2.h
    out.push_back("gpt_neox");
    return out;
  }();
  return names;
}

namespace {

// Fields that change the computation in ways the family as dew reads it does not have, refused naming them.
void refuse_unsupported(const Reader& r, const Family& f, const std::string& source) {
  if (r.number("attention_dropout", 0.0) != 0.0) {
    dew::fail(source, ": attention_dropout is ", r.number("attention_dropout"),
              "; dew trains without attention dropout, so fine-tuning would differ (set it to 0.0 to load anyway)");
  }
  if (!f.masked_diffusion && r.boolean("use_bidirectional_attention", false)) {
    dew::fail(source, ": use_bidirectional_attention is true; dew reads the causal decoders of these families only "
              "(masked-diffusion checkpoints it reads as model_type llada or Dream)");
  }
  if (f.masked_diffusion) {
    if (r.boolean("use_sliding_window", false)) {
      dew::fail(source, ": use_sliding_window is true; Dream attends to the whole row on every layer, and dew reads it so");
    }
    if (r.boolean("use_mrope", false)) {
      dew::fail(source, ": use_mrope is true; dew computes one-dimensional rotary positions, not multimodal (3-D) rope");
    }
  }
}

// The rotary bases and scaling: one base for every layer, or (local_rope) a global and a sliding one.
// Returns the sliding layers' base (0 = the global one).
double read_rotary(const Reader& r, const Json& config, const Family& f, CausalTransformerConfig& c, const std::string& source) {
  double kind_theta = 0.0;
  if (f.local_rope) {
    auto global = read_rope(r, config, "full_attention", 1'000'000.0, "rope_theta");
    auto local = read_rope(r, config, "sliding_attention", 10'000.0, "rope_local_base_freq");
    if (local.scaling.type != "none") {
      dew::fail(source, ": rope_parameters.sliding_attention.rope_type is '", local.scaling.type,
                "'; dew scales only the full-attention layers' rotary frequencies");
    }
    c.rope_theta = global.theta;
    c.rope_scaling = global.scaling;
    kind_theta = local.theta;
  } else if (f.variant == Variant::phi3) {  // partial rotary: the factor taken out, the rest read as usual
    Json rest = config;
    double partial = take_partial_rotary(rest);
    auto longrope = take_longrope(rest, source);
    auto rope = read_rope(Reader(rest, source), rest, "full_attention", 10'000.0, "rope_theta");
    c.rope_theta = rope.theta;
    c.rope_scaling = longrope ? *longrope : rope.scaling;
    c.rotary_dim = static_cast<std::int64_t>(static_cast<double>(c.resolved_head_dim()) * partial);  // transformers' int(...)
    if (c.rotary_dim == c.resolved_head_dim()) c.rotary_dim = 0;
  } else {
    auto rope = read_rope(r, config, "full_attention", 10'000.0, "rope_theta");
    c.rope_theta = rope.theta;
    c.rope_scaling = rope.scaling;
  }
  return kind_theta;
}

// Which layers slide, and their window, as the family's config says it.
void read_sliding(const Reader& r, const Family& f, double kind_theta, CausalTransformerConfig& c) {
  switch (f.sliding) {
    case Sliding::None: break;
    case Sliding::AllLayers: {
      auto window = r.integer("sliding_window", 0);
      if (window > 0) set_sliding(c, std::vector<std::string>(c.num_layers, "sliding_attention"), window, 0.0);
      break;
    }
    case Sliding::AfterMaxWindowLayers: {
      if (!r.boolean("use_sliding_window", false)) break;  // transformers then ignores sliding_window
      auto window = r.integer("sliding_window", 4096);
      auto types = read_layer_types(r, c.num_layers);
      if (types.empty()) {
        auto first = r.integer("max_window_layers", 28);
        for (std::int64_t i = 0; i < c.num_layers; ++i) types.push_back(i >= first ? "sliding_attention" : "full_attention");
      }
      set_sliding(c, types, window, 0.0);
      break;
    }
    case Sliding::LayerTypes: {
      auto window = r.integer("sliding_window", 4096);
      auto types = read_layer_types(r, c.num_layers);
      if (types.empty()) {
        auto pattern = r.integer("sliding_window_pattern", f.sliding_pattern);
        for (std::int64_t i = 0; i < c.num_layers; ++i) {
          types.push_back((i + 1) % pattern != 0 ? "sliding_attention" : "full_attention");
        }
      }
      set_sliding(c, types, window, kind_theta);
      break;
    }
  }
}

}  // namespace

// A field table in code (with refuse_unsupported, read_rotary and read_sliding above): one short line per
// config.json field dew reads, refuses or knows to be inert, so a reader checks a field's rule in one place.
CausalTransformerConfig config_from_hf(const Json& config, const std::string& source) {
  if (!config.is_object()) dew::fail(source, ": config.json is not a JSON object");
  Reader r(config, source);
  if (!r.has("model_type")) dew::fail(source, ": config.json has no model_type; dew reads ", hf_model_types().size(), " decoder families");
  const std::string model_type = r.string("model_type", "");

  // Fp8 block-scaled weights are dequantized at load (hf_quantization.h); other methods are refused there.
  read_quantization_config(config, source);
  if (model_type == "llada") return llada_config_from_hf(config, source);
  if (model_type == "gpt2") return gpt2_config_from_hf(config, source);
  if (model_type == "gpt_neox") return gpt_neox_config_from_hf(config, source);
  const Family& f = family_named(model_type, source);
  read_variant_fields(r, f.variant);
  refuse_unsupported(r, f, source);
  CausalTransformerConfig c;
  c.vocab_size = r.integer("vocab_size");
  c.emb_features = r.integer("hidden_size");
  c.num_layers = r.integer("num_hidden_layers");
  c.num_heads = r.integer("num_attention_heads");
  c.num_kv_heads = r.integer("num_key_value_heads", c.num_heads);
  c.head_dim = r.integer("head_dim", 0);
  if (c.num_heads <= 0) dew::fail(source, ": num_attention_heads must be positive, got ", c.num_heads);
  if (c.head_dim == 0) c.head_dim = c.emb_features / c.num_heads;
  if (f.masked_diffusion && c.head_dim * c.num_heads != c.emb_features) {  // Dream derives it and ignores the field
    dew::fail(source, ": head_dim is ", c.head_dim, " but Dream's heads are hidden_size / num_attention_heads = ",
              c.emb_features / c.num_heads, " wide");
  }
  c.mlp_features = r.integer("intermediate_size");
  c.max_seq_len = r.integer("max_position_embeddings");
  c.norm_eps = r.number("rms_norm_eps", 1e-6);
  c.tie_embeddings = r.boolean("tie_word_embeddings", f.default_tied);
  if (f.moe) detail::read_moe_fields(r, f.model_type, c);
  c.qk_norm = f.qk_norm;
  c.causal = !f.masked_diffusion;
  if (f.masked_diffusion) {
    c.mask_token_id = detail::read_mask_token_id(r, c.vocab_size, "Dream");
    c.shift_logits = true;  // modeling_dream keeps Qwen's next-token alignment; its sampler shifts the logits right by one
  }
  c.dtype = c.param_dtype = "float32";

  std::string default_act = f.gemma ? "gelu_pytorch_tanh" : "silu";
  std::string act = r.string(f.activation_field, default_act);
  if (f.model_type == "gemma" && act == "gelu") act = "gelu_pytorch_tanh";  // transformers' own legacy rewrite
  c.mlp = activation_to_mlp(act, f.activation_field, source);

  switch (f.bias) {
    case AttentionBias::FromConfig: c.attention_bias = c.attention_output_bias = r.boolean("attention_bias", false); break;
    case AttentionBias::QkvOnly: c.attention_bias = true; break;
    case AttentionBias::QkvField: c.attention_bias = r.boolean("qkv_bias", true); break;
    case AttentionBias::None: break;
  }
  if (f.mlp_bias) c.mlp_bias = r.boolean("mlp_bias", false);

  if (f.gemma) {
    c.norm_weight_offset = 1.0;
    c.embedding_scale = std::sqrt(static_cast<double>(c.emb_features));
  }
  c.sandwich_norms = f.sandwich;
  if (f.softcaps) {
    c.attn_logit_softcap = r.number("attn_logit_softcapping", f.model_type == "gemma2" ? 50.0 : 0.0);
    c.final_logit_softcap = r.number("final_logit_softcapping", f.model_type == "gemma2" ? 30.0 : 0.0);
    c.query_pre_attn_scalar = r.number("query_pre_attn_scalar", 256.0);
  }

  // Rotary positions and which layers slide.
  const double kind_theta = read_rotary(r, config, f, c, source);
  apply_variant(r, f.variant, c);
  read_sliding(r, f, kind_theta, c);
  try {
    c.validate();
  } catch (const dew::Error& e) {
    dew::fail(source, ": the translated config is invalid: ", e.what());
  }
  return c;
}

namespace {

[[noreturn]] void refuse(const std::string& model_type, const std::string& field, const std::string& why) {
  dew::fail("cannot export as ", model_type, ": model.", field, " ", why);
}

// What the family cannot express, refused naming the field: the checks of the field table below.
void refuse_unexportable(const CausalTransformerConfig& c, const Family& f) {
  const auto& mt = f.model_type;
  auto head_dim = c.resolved_head_dim();
  auto features = features_of(f.variant);
  features.experts = f.moe;
  detail::refuse_block_features(c, mt, features);
  if (f.variant == Variant::olmo2 && (c.pre_norms || c.qk_norm_per_head)) {
    refuse(mt, c.pre_norms ? "pre_norms" : "qk_norm_per_head", "is true; OLMo 2 norms only after each sublayer, and q/k over the whole projection");
  }
  if (f.masked_diffusion) {
    if (c.causal) refuse(mt, "causal", "is true; " + mt + " attends both ways (export a causal decoder as qwen2, llama, ...)");
    if (c.mask_token_id < 0) refuse(mt, "mask_token_id", "is -1; a " + mt + " checkpoint names its mask token (set model.mask_token_id)");
    if (!c.shift_logits) refuse(mt, "shift_logits", "is false; Dream's logits at position i predict token i + 1 (export as llada)");
    if (head_dim * c.num_heads != c.emb_features) {
      refuse(mt, "head_dim", dew::str("is ", head_dim, "; ", mt, "'s heads are emb_features / num_heads = ", c.emb_features / c.num_heads, " wide"));
    }
  } else if (!c.causal) {
    refuse(mt, "causal", "is false; these families are causal decoders (a masked-diffusion model with model.mask_token_id exports as llada or dream)");
  }
  if (c.mlp == "gelu" || c.mlp == "gelu_erf") refuse(mt, "mlp", "is " + c.mlp + " (ungated); the family's MLP is gated (swiglu or geglu)");
  if (c.qk_norm != f.qk_norm) refuse(mt, "qk_norm", std::string("is ") + (c.qk_norm ? "true" : "false") + "; " + mt + (f.qk_norm ? " has" : " has no") + " q/k norms");
  if (c.norm_weight_offset != (f.gemma ? 1.0 : 0.0)) {
    refuse(mt, "norm_weight_offset", dew::str("is ", c.norm_weight_offset, "; ", mt, " uses ", f.gemma ? 1 : 0));
  }
  double want_scale = f.gemma ? std::sqrt(static_cast<double>(c.emb_features)) : 1.0;
  if (f.variant != Variant::granite && std::abs(c.embedding_scale - want_scale) > 1e-6 * want_scale) {
    refuse(mt, "embedding_scale", dew::str("is ", c.embedding_scale, "; ", mt, " scales embeddings by ", want_scale));
  }
  if (c.sandwich_norms != f.sandwich) refuse(mt, "sandwich_norms", std::string("does not match ") + mt + "'s block");
  if (!f.softcaps) {
    if (c.attn_logit_softcap > 0) refuse(mt, "attn_logit_softcap", dew::str("is ", c.attn_logit_softcap, "; ", mt, " has none"));
    if (c.final_logit_softcap > 0) refuse(mt, "final_logit_softcap", dew::str("is ", c.final_logit_softcap, "; ", mt, " has none"));
    if (c.query_pre_attn_scalar > 0 && c.query_pre_attn_scalar != static_cast<double>(head_dim)) {
      refuse(mt, "query_pre_attn_scalar", dew::str("is ", c.query_pre_attn_scalar, "; ", mt, " scales by head_dim^-0.5"));
    }
  }
  switch (f.bias) {
    case AttentionBias::FromConfig:
      if (c.attention_bias != c.attention_output_bias) {
        refuse(mt, "attention_output_bias", "differs from model.attention_bias; " + mt + " has biases on all four projections or none");
      }
      break;
    case AttentionBias::QkvOnly:
      if (!c.attention_bias || c.attention_output_bias) {
        refuse(mt, "attention_bias", "must be true and model.attention_output_bias false: " + mt + " has q/k/v biases only");
      }
      break;
    case AttentionBias::QkvField:
      if (c.attention_output_bias) refuse(mt, "attention_output_bias", "is true; " + mt + " has q/k/v biases only");
      break;
    case AttentionBias::None:
      if (c.attention_bias || c.attention_output_bias) refuse(mt, "attention_bias", "is set; " + mt + " has no attention biases");
      break;
  }
  if (c.mlp_bias && !f.mlp_bias) refuse(mt, "mlp_bias", "is true; only llama has MLP biases");
}

// Per-layer windows and rotary bases, as the family's config can hold them: one sliding window, one local base.
struct LayerWindows {
  std::vector<std::int64_t> windows;  // per layer; 0 = full attention
  std::int64_t window = 0;            // the sliding window (0 = none)
  double local_theta = 0.0;           // the sliding layers' rotary base (0 = the global one)
};

LayerWindows layer_windows(const CausalTransformerConfig& c, const Family& f) {
  const auto& mt = f.model_type;
  LayerWindows out;
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    auto w = c.window_of_layer(i);
    auto theta = c.kind_rope_theta_of_layer(i);
    out.windows.push_back(w);
    if (w > 0) {
      if (out.window > 0 && w != out.window) refuse(mt, "kinds", dew::str("have windows ", out.window, " and ", w, "; the family has one sliding_window"));
      out.window = w;
      if (out.local_theta > 0 && theta != out.local_theta) refuse(mt, "kinds", "have several rotary bases; the family has one per layer type");
      if (theta > 0) out.local_theta = theta;
    } else if (theta > 0) {
      refuse(mt, "kinds", "give a full-attention layer its own rope_theta; only sliding layers have a local base");
    }
  }
  if (out.local_theta > 0 && !f.local_rope) refuse(mt, "kinds.*.rope_theta", dew::str("is ", out.local_theta, "; ", mt, " has one rotary base"));
  if (f.local_rope && c.rope_scaling.type == "llama3") refuse(mt, "rope_scaling.type", "is llama3; gemma3 scales linearly");
  return out;
}

// layer_types, sliding_window and the family's own fields for which layers slide.
void write_sliding_fields(const CausalTransformerConfig& c, const Family& f, const LayerWindows& lw, Json& out) {
  const auto& mt = f.model_type;
  const auto& windows = lw.windows;
  const std::int64_t window = lw.window;
  Json types = Json::array();
  for (auto w : windows) types.push_back(w > 0 ? "sliding_attention" : "full_attention");
  if (f.masked_diffusion) {
    out["mask_token_id"] = c.mask_token_id;
    out["use_sliding_window"] = false;  // Dream's config class reads these Qwen2 fields; its attention ignores them
    out["sliding_window"] = nullptr;
    out["max_window_layers"] = c.num_layers;
  }
  switch (f.sliding) {
    case Sliding::None:
      if (window > 0) refuse(mt, "kinds", dew::str("give layers a sliding window (", window, "); ", mt, " has none"));
      break;
    case Sliding::AllLayers:
      if (window > 0 && std::count(windows.begin(), windows.end(), window) != c.num_layers) {
        refuse(mt, "layer_types", "slide on some layers only; mistral's sliding_window applies to every layer");
      }
      out["sliding_window"] = window > 0 ? Json(window) : Json(nullptr);
      break;
    case Sliding::AfterMaxWindowLayers: {
      auto first = std::find_if(windows.begin(), windows.end(), [](auto w) { return w > 0; }) - windows.begin();
      for (auto i = first; i < c.num_layers; ++i) {
        if (windows[i] == 0) refuse(mt, "layer_types", dew::str("have a full layer (", i, ") after a sliding one; ", mt, " slides on the last layers only"));
      }
      out["use_sliding_window"] = window > 0;
      out["sliding_window"] = window > 0 ? Json(window) : Json(nullptr);
      out["max_window_layers"] = first;
      out["layer_types"] = types;
      break;
    }
    case Sliding::LayerTypes:
      out["sliding_window"] = window > 0 ? window : 4096;
      out["layer_types"] = types;
      break;
  }
}

// The config.json fields of a variant (Family::variant), beside the table's.
void add_variant_fields(const CausalTransformerConfig& c, const Family& f, Json& out) {
  const auto head_dim = static_cast<double>(c.resolved_head_dim());
  switch (f.variant) {
    case Variant::phi3:
      if (c.rope_scaling.type != "none" && c.rope_scaling.type != "longrope") {
        refuse(f.model_type, "rope_scaling.type", "is " + c.rope_scaling.type + "; Phi-3 computes default or longrope rotary only");
      }
      out["partial_rotary_factor"] = static_cast<double>(c.resolved_rotary_dim()) / head_dim;
      out["original_max_position_embeddings"] = c.max_seq_len;
      if (c.rope_scaling.type == "longrope") {
        const auto& s = c.rope_scaling;
        out["original_max_position_embeddings"] = s.original_max_position_embeddings;
        out["rope_scaling"] = {{"rope_type", "longrope"}, {"short_factor", s.short_factor}, {"long_factor", s.long_factor},
                               {"factor", s.factor}, {"attention_factor", s.attention_factor}};
      }
      out["resid_pdrop"] = 0.0;
      out["embd_pdrop"] = 0.0;
      // Phi3Config's defaults (1, 32000, 32000) are Phi-3's vocabulary's ids, outside a smaller one, which
      // transformers refuses; save_hf_model writes the model's own where it knows them.
      for (const char* id : {"bos_token_id", "eos_token_id", "pad_token_id"}) out[id] = nullptr;
      break;
    case Variant::granite:
      out["embedding_multiplier"] = c.embedding_scale;
      out["residual_multiplier"] = c.residual_multiplier;
      out["attention_multiplier"] = c.attention_scale > 0 ? c.attention_scale : 1.0 / std::sqrt(c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : head_dim);
      out["logits_scaling"] = c.logits_scaling;
      break;
    case Variant::olmo2:
    case Variant::plain: break;
  }
}

}  // namespace

// The same field table written the other way (config_from_hf's inverse), one line per field; what the family
// cannot express is refused first (refuse_unexportable, layer_windows).
Json config_to_hf(const CausalTransformerConfig& c, const std::string& model_type) {
  c.validate();
  if (model_type == "llada") return llada_config_to_hf(c);
  if (model_type == "gpt2") return gpt2_config_to_hf(c);
  if (model_type == "gpt_neox") return gpt_neox_config_to_hf(c);
  const Family& f = family_named(model_type, "export");
  const auto& mt = f.model_type;
  auto head_dim = c.resolved_head_dim();
  refuse_unexportable(c, f);
  const LayerWindows lw = layer_windows(c, f);
  const double local_theta = lw.local_theta;

  Json out;
  out["architectures"] = Json::array({f.architecture});
  out["model_type"] = f.spelled.empty() ? mt : f.spelled;
  out["vocab_size"] = c.vocab_size;
  out["hidden_size"] = c.emb_features;
  out["intermediate_size"] = c.resolved_mlp_features();
  out["num_hidden_layers"] = c.num_layers;
  out["num_attention_heads"] = c.num_heads;
  out["num_key_value_heads"] = c.resolved_kv_heads();
  if (!f.masked_diffusion) out["head_dim"] = head_dim;  // Dream derives it from hidden_size / num_attention_heads
  out[f.activation_field] = c.mlp == "swiglu" ? "silu" : "gelu_pytorch_tanh";
  out["max_position_embeddings"] = c.max_seq_len;
  out["rms_norm_eps"] = c.norm_eps;
  out["tie_word_embeddings"] = c.tie_embeddings;
  out["attention_dropout"] = 0.0;
  if (f.bias == AttentionBias::FromConfig) out["attention_bias"] = c.attention_bias;
  if (f.bias == AttentionBias::QkvField) out["qkv_bias"] = c.attention_bias;
  if (f.mlp_bias) out["mlp_bias"] = c.mlp_bias;
  out["rope_theta"] = c.rope_theta;
  if (c.rope_scaling.type == "linear") {
    out["rope_scaling"] = {{"rope_type", "linear"}, {"factor", c.rope_scaling.factor}};
  } else if (c.rope_scaling.type == "llama3") {
    out["rope_scaling"] = {{"rope_type", "llama3"},
                           {"factor", c.rope_scaling.factor},
                           {"low_freq_factor", c.rope_scaling.low_freq_factor},
                           {"high_freq_factor", c.rope_scaling.high_freq_factor},
                           {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}};
  } else if (c.rope_scaling.type == "longrope" && f.variant != Variant::phi3) {
    refuse(mt, "rope_scaling.type", "is longrope; dew computes it as phi3 only (add_variant_fields writes it)");
  } else {
    out["rope_scaling"] = nullptr;
  }
  if (f.local_rope) out["rope_local_base_freq"] = local_theta > 0 ? local_theta : c.rope_theta;
  if (f.local_rope && local_theta == 0 && c.rope_scaling.type != "none") {
    refuse(mt, "kinds.sliding_attention.rope_theta", "is unset while rope_scaling is set; gemma3's local layers are unscaled");
  }
  if (f.softcaps) {
    // transformers' strict config wants an integer here (Gemma's are 256, 144, 168).
    double scalar = c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : static_cast<double>(head_dim);
    if (scalar == std::floor(scalar)) {
      out["query_pre_attn_scalar"] = static_cast<std::int64_t>(scalar);
    } else {
      out["query_pre_attn_scalar"] = scalar;
    }
    out["attn_logit_softcapping"] = c.attn_logit_softcap > 0 ? Json(c.attn_logit_softcap) : Json(nullptr);
    out["final_logit_softcapping"] = c.final_logit_softcap > 0 ? Json(c.final_logit_softcap) : Json(nullptr);
  } else if (c.final_logit_softcap > 0) {
    refuse(mt, "final_logit_softcap", "is set; the family has none");
  }
  add_variant_fields(c, f, out);
  if (f.moe) detail::write_moe_fields(c, mt, out);
  write_sliding_fields(c, f, lw, out);
  return out;
}

std::string hf_model_type_for(const CausalTransformerConfig& c) {
  if (c.has_moe()) return detail::hf_moe_model_type_for(c);
  if (c.norm == "layernorm") return c.positions == "learned" ? "gpt2" : "gpt_neox";
  if (!c.pre_norms) return "olmo2";
  if (c.residual_multiplier != 1.0 || c.attention_scale > 0 || c.logits_scaling != 1.0) return "granite";
  if (c.causal && c.resolved_rotary_dim() != c.resolved_head_dim()) return "phi3";
  // Masked-diffusion (bidirectional) models: Dream's block is Qwen2's, LLaDA's Llama's.
  if (!c.causal) return c.shift_logits ? "dream" : "llada";
  if (c.sandwich_norms) return c.qk_norm ? "gemma3_text" : "gemma2";
  if (c.norm_weight_offset == 1.0) return "gemma";
  if (c.qk_norm) return "qwen3";
  if (c.attention_bias && !c.attention_output_bias) return "qwen2";
  bool all_same_window = c.window_of_layer(0) > 0;
  for (std::int64_t i = 1; i < c.num_layers && all_same_window; ++i) all_same_window = c.window_of_layer(i) == c.window_of_layer(0);
  return all_same_window ? "mistral" : "llama";
}

std::string hf_family_name(const std::string& model_type) {
  for (const auto& f : families()) {
    if (!f.spelled.empty() && f.spelled == model_type) return f.model_type;
  }
  return model_type;
}

}  // namespace dew::interop
