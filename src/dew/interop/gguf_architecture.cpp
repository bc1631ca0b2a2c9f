// The GGUF architecture rows and the metadata of each feature, read and written as llama.cpp's converter
// writes them and its loader (src/models/ARCH.cpp load_arch_hparams) reads them.
#include "dew/interop/gguf_architecture.h"

#include <algorithm>
#include <cmath>

#include "dew/core/error.h"
#include "dew/interop/hf_block_features.h"

namespace dew::interop {
namespace {

using nn::CausalTransformerConfig;

std::vector<GgufArchitecture> make_rows() {
  std::vector<GgufArchitecture> rows;
  auto row = [&](const char* name, const char* mlp, std::vector<std::string> hf = {}) -> GgufArchitecture& {
    if (hf.empty()) hf = {name};
    rows.push_back({.name = name, .hf_families = std::move(hf), .mlp = mlp});
    return rows.back();
  };
  {  // LlamaModel: permuted q/k, optional biases (Llama 1/2/3, SmolLM, Mistral as llama.cpp writes them)
    auto& r = row("llama", "swiglu", {"llama", "mistral"});
    r.permuted_qk = r.write_rope_dims = true;
    r.biases = GgufBiases::optional;
  }
  row("qwen2", "swiglu").biases = GgufBiases::qkv;
  row("qwen3", "swiglu").qk_norm = true;
  {  // GemmaModel: norms stored + 1, sqrt(n_embd) embedding scale, tied (the converter drops lm_head)
    auto& r = row("gemma", "geglu");
    r.gemma = r.tied_always = true;
  }
  {  // Gemma2Model: sandwich norms, both softcaps, every 2nd layer full (set_swa_pattern(2)), window 4096
    auto& r = row("gemma2", "geglu");
    r.gemma = r.tied_always = r.sandwich = r.attn_softcap = r.final_softcap = true;
    r.default_final_softcap = 30.0;
    r.sliding = GgufSliding::pattern;
    r.default_window = 4096;
    r.default_period = 2;
  }
  {  // Gemma3Model: per-head q/k norms, final softcap only, every 6th layer full, local base 10000 unscaled
    auto& r = row("gemma3", "geglu", {"gemma3_text"});
    r.gemma = r.sandwich = r.qk_norm = r.final_softcap = true;
    r.sliding = GgufSliding::pattern;
    r.default_period = 6;
    r.default_local_theta = 10000.0;
  }
  {  // Phi3MiniModel: fused qkv_proj and gate_up_proj, partial rotary, one sliding window for every layer
    auto& r = row("phi3", "swiglu");
    r.fused_qkv = r.fused_gate_up = r.partial_rotary = r.write_rope_dims = true;
    r.sliding = GgufSliding::all;
  }
  {  // GPT2Model: LayerNorm, learned positions, Conv1D c_attn as attn_qkv, biases everywhere, gelu
    auto& r = row("gpt2", "gelu");
    r.layer_norm = r.learned_positions = r.fused_qkv = true;
    r.biases = GgufBiases::all;
  }
  {  // GPTNeoXModel: LayerNorm, per-head query_key_value regrouped to [q; k; v], partial rotary, parallel residual
    auto& r = row("gptneox", "gelu", {"gpt_neox"});
    r.layer_norm = r.fused_qkv = r.partial_rotary = r.write_rope_dims = r.parallel_residual = true;
    r.biases = GgufBiases::all;
  }
  {  // Olmo2Model: norms only after each sublayer, q/k norms over the whole projection, output.weight required
    auto& r = row("olmo2", "swiglu");
    r.qk_norm = r.sandwich = r.post_norms_only = r.output_required = true;
  }
  {  // GraniteModel (a LlamaModel): permuted q/k, optional biases, four multipliers as metadata keys
    auto& r = row("granite", "swiglu");
    r.permuted_qk = r.multipliers = r.write_rope_dims = true;
    r.biases = GgufBiases::optional;
  }
  return rows;
}

const std::vector<GgufArchitecture>& rows() {
  static const std::vector<GgufArchitecture> all = make_rows();
  return all;
}

std::string key(const GgufArchitecture& a, const char* suffix) { return a.name + "." + suffix; }

double float_or(const formats::GgufFile& f, const std::string& k, double fallback) {
  const auto* v = f.find(k);
  return v ? v->as_float() : fallback;
}

// rope.freq_base, rope.dimension_count (partial rotary where the row has it) and rope.scaling.*; llama.cpp
// applies a linear factor (freq_scale = 1 / factor) to every rotary architecture.
void read_rotary(const GgufArchitecture& a, const formats::GgufFile& f, CausalTransformerConfig& c) {
  if (a.learned_positions) {
    c.positions = "learned";
    return;
  }
  c.rope_theta = float_or(f, key(a, "rope.freq_base"), 10000.0);
  if (const auto* dims = f.find(key(a, "rope.dimension_count")); dims && dims->as_int() != c.resolved_head_dim()) {
    const std::int64_t d = dims->as_int();
    if (!a.partial_rotary || d <= 0 || d > c.resolved_head_dim() || d % 2 != 0)
      dew::fail(f.name(), ": metadata '", key(a, "rope.dimension_count"), "' is ", d, " but head_dim is ",
                c.resolved_head_dim(), a.partial_rotary ? "; it must be even and at most head_dim"
                                                        : "; rotary positions over part of a head are not supported for " + a.name);
    c.rotary_dim = d;
  }
  const auto* type = f.find(key(a, "rope.scaling.type"));
  const double factor = float_or(f, key(a, "rope.scaling.factor"), 0.0);
  const std::string t = type ? type->as_string() : (factor != 0.0 && factor != 1.0 ? "linear" : "none");
  if (t == "linear" && factor != 0.0 && factor != 1.0) {
    c.rope_scaling.type = "linear";
    c.rope_scaling.factor = factor;
  } else if (t != "none" && t != "linear") {
    dew::fail(f.name(), ": metadata '", key(a, "rope.scaling.type"), "' is \"", t,
              "\"; dew computes none and linear rotary scaling for GGUF models (yarn, longrope and llama3's "
              "rope_freqs are not supported)");
  }
}

// Which layers slide (attention.sliding_window, attention.sliding_window_pattern) and their rotary base.
void read_sliding(const GgufArchitecture& a, const formats::GgufFile& f, CausalTransformerConfig& c) {
  const auto* window_key = f.find(key(a, "attention.sliding_window"));
  const std::int64_t window = window_key ? window_key->as_int() : a.default_window;
  if (a.sliding == GgufSliding::none) {
    if (window > 0)
      dew::fail(f.name(), ": metadata '", key(a, "attention.sliding_window"), "' is ", window, "; dew's ", a.name,
                " attends to every earlier key (sliding windows are not supported for it)");
    return;
  }
  if (window <= 0) return;
  std::vector<bool> slides(static_cast<std::size_t>(c.num_layers), a.sliding == GgufSliding::all);
  if (a.sliding == GgufSliding::pattern) {
    const auto* pattern = f.find(key(a, "attention.sliding_window_pattern"));
    if (pattern && pattern->type == formats::GgufType::Array) {
      const auto& values = pattern->as_array();
      if (static_cast<std::int64_t>(values.size()) != c.num_layers)
        dew::fail(f.name(), ": metadata '", key(a, "attention.sliding_window_pattern"), "' has ", values.size(),
                  " entries; it needs one per layer (", c.num_layers, ")");
      for (std::size_t i = 0; i < values.size(); ++i) slides[i] = values[i].as_bool();
    } else {
      const std::int64_t period = pattern ? pattern->as_int() : a.default_period;
      for (std::int64_t i = 0; i < c.num_layers; ++i) slides[i] = period == 0 || i % period < period - 1;
    }
  }
  double local = float_or(f, key(a, "rope.freq_base_swa"), a.default_local_theta);
  if (a.default_local_theta == 0.0 && local == c.rope_theta) local = 0.0;  // the global base, scaled alike
  if (local != 0.0 && a.default_local_theta == 0.0 && c.rope_scaling.type != "none")
    dew::fail(f.name(), ": metadata '", key(a, "rope.freq_base_swa"), "' is ", local, " with rope scaling \"",
              c.rope_scaling.type, "\"; llama.cpp's ", a.name, " scales the sliding layers' base too, which dew does not");
  if (std::none_of(slides.begin(), slides.end(), [](bool s) { return s; })) return;
  c.layer_types.clear();
  for (bool s : slides) c.layer_types.push_back(s ? "sliding_attention" : "full_attention");
  c.kinds["sliding_attention"] = nn::LayerKind{window, local};
}

void read_biases(const GgufArchitecture& a, const formats::GgufFile& f, CausalTransformerConfig& c) {
  switch (a.biases) {
    case GgufBiases::optional:
      c.attention_bias = f.find_tensor(a.fused_qkv ? "blk.0.attn_qkv.bias" : "blk.0.attn_q.bias") != nullptr;
      c.attention_output_bias = f.find_tensor("blk.0.attn_output.bias") != nullptr;
      c.mlp_bias = f.find_tensor("blk.0.ffn_down.bias") != nullptr;
      break;
    case GgufBiases::qkv: c.attention_bias = true; break;
    case GgufBiases::all: c.attention_bias = c.attention_output_bias = c.mlp_bias = true; break;
    case GgufBiases::none: break;
  }
}

}  // namespace

const GgufArchitecture& gguf_architecture(const std::string& name, const std::string& source) {
  for (const auto& r : rows())
    if (r.name == name) return r;
  dew::fail(source, ": general.architecture is \"", name, "\"; dew reads and writes the GGUF architectures ",
            gguf_architecture_names());
}

const GgufArchitecture& gguf_export_architecture(const std::string& name) {
  for (const auto& r : rows())
    if (r.name == name || std::find(r.hf_families.begin(), r.hf_families.end(), name) != r.hf_families.end()) return r;
  dew::fail("GGUF export: architecture \"", name, "\" is not supported; use one of ", gguf_architecture_names(),
            " (or the Hugging Face model_type of one)");
}

std::string gguf_architecture_names() {
  std::string out;
  for (const auto& r : rows()) out += (out.empty() ? "" : ", ") + r.name;
  return out;
}

void read_gguf_features(const GgufArchitecture& a, const formats::GgufFile& f, CausalTransformerConfig& c) {
  c.norm = a.layer_norm ? "layernorm" : "rmsnorm";
  c.norm_eps = f.at(key(a, a.layer_norm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon")).as_float();
  c.mlp = a.mlp;
  read_rotary(a, f, c);
  read_biases(a, f, c);
  c.qk_norm = a.qk_norm;
  c.qk_norm_per_head = !a.post_norms_only;
  c.sandwich_norms = a.sandwich;
  c.pre_norms = !a.post_norms_only;
  if (a.gemma) {
    c.norm_weight_offset = 1.0;  // the loader subtracts the 1 the converter added to every norm weight
    c.embedding_scale = std::sqrt(static_cast<double>(c.emb_features));
  }
  c.tie_embeddings = a.tied_always || f.find_tensor("output.weight") == nullptr;
  if (a.attn_softcap) c.attn_logit_softcap = float_or(f, key(a, "attn_logit_softcapping"), 50.0);
  if (a.final_softcap) c.final_logit_softcap = float_or(f, key(a, "final_logit_softcapping"), a.default_final_softcap);
  if (a.parallel_residual) c.parallel_residual = f.at(key(a, "use_parallel_residual")).as_bool();
  if (a.multipliers) {
    // llama.cpp's granite: 0 (or absent) means no scaling, except logit_scale, which it requires.
    auto scale = [&](const char* k, double none) { double v = float_or(f, key(a, k), 0.0); return v == 0.0 ? none : v; };
    c.attention_scale = float_or(f, key(a, "attention.scale"), 0.0);
    c.embedding_scale = scale("embedding_scale", 1.0);
    c.residual_multiplier = scale("residual_scale", 1.0);
    c.logits_scaling = f.at(key(a, "logit_scale")).as_float();
  }
  read_sliding(a, f, c);
}

namespace {

[[noreturn]] void refuse(const GgufArchitecture& a, const std::string& field, const std::string& why) {
  dew::fail("GGUF export: the model's ", field, " ", why, "; llama.cpp's ", a.name, " architecture cannot express it");
}

std::string yes(bool b) { return b ? "true" : "false"; }

// The block: norms, MLP, q/k norms, biases, gemma's conventions, multipliers.
void refuse_block(const GgufArchitecture& a, const CausalTransformerConfig& c) {
  detail::refuse_block_features(c, a.name, {.layernorm = a.layer_norm, .learned_positions = a.learned_positions,
                                            .partial_rotary = a.partial_rotary, .parallel_residual = a.parallel_residual,
                                            .post_norms_only = a.post_norms_only,
                                            .whole_projection_qk_norm = a.post_norms_only, .multipliers = a.multipliers});
  if (c.norm != (a.layer_norm ? "layernorm" : "rmsnorm")) refuse(a, "norm", "is \"" + c.norm + "\"");
  if ((c.positions == "learned") != a.learned_positions) refuse(a, "positions", "is \"" + c.positions + "\"");
  if (c.mlp != a.mlp) refuse(a, "mlp", "is \"" + c.mlp + "\" (" + a.name + " computes " + a.mlp + ")");
  if (c.qk_norm != a.qk_norm) refuse(a, "qk_norm", "is " + yes(c.qk_norm) + " (" + a.name + (a.qk_norm ? " always has it)" : " has none)"));
  if (c.qk_norm && c.qk_norm_per_head == a.post_norms_only) refuse(a, "qk_norm_per_head", "is " + yes(c.qk_norm_per_head));
  if (c.sandwich_norms != a.sandwich) refuse(a, "sandwich_norms", "is " + yes(c.sandwich_norms));
  if (c.pre_norms == a.post_norms_only) refuse(a, "pre_norms", "is " + yes(c.pre_norms));
  if (!a.parallel_residual && c.parallel_residual) refuse(a, "parallel_residual", "is true");
  if (c.norm_weight_offset != (a.gemma ? 1.0 : 0.0)) refuse(a, "norm_weight_offset", dew::str("is ", c.norm_weight_offset));
  const double scale = a.gemma ? std::sqrt(static_cast<double>(c.emb_features)) : 1.0;
  if (!a.multipliers && std::abs(c.embedding_scale - scale) > 1e-6 * scale)
    refuse(a, "embedding_scale", dew::str("is ", c.embedding_scale, " (", a.name, " scales by ", scale, ")"));
  if (a.tied_always && !c.tie_embeddings) refuse(a, "tie_embeddings", "is false (llama.cpp's " + a.name + " reuses token_embd)");
  const bool qkv = c.attention_bias, o = c.attention_output_bias, m = c.mlp_bias;
  switch (a.biases) {
    case GgufBiases::optional: break;
    case GgufBiases::qkv:
      if (o) refuse(a, "attention_output_bias", "is true");
      if (m) refuse(a, "mlp_bias", "is true");
      break;
    case GgufBiases::all:
      if (!qkv || !o || !m) refuse(a, qkv ? (o ? "mlp_bias" : "attention_output_bias") : "attention_bias", "is false (" + a.name + " has every bias)");
      break;
    case GgufBiases::none:
      if (qkv || o || m) refuse(a, qkv ? "attention_bias" : (o ? "attention_output_bias" : "mlp_bias"), "is true");
      break;
  }
}

// Softcaps, attention scale, rotary.
void refuse_scores(const GgufArchitecture& a, const CausalTransformerConfig& c) {
  if (c.attn_logit_softcap != 0 && !a.attn_softcap) refuse(a, "attn_logit_softcap", dew::str("is ", c.attn_logit_softcap));
  if (a.attn_softcap && c.attn_logit_softcap <= 0) refuse(a, "attn_logit_softcap", "is 0 (" + a.name + " always caps)");
  if (c.final_logit_softcap != 0 && !a.final_softcap) refuse(a, "final_logit_softcap", dew::str("is ", c.final_logit_softcap));
  if (a.attn_softcap && c.final_logit_softcap <= 0) refuse(a, "final_logit_softcap", "is 0 (" + a.name + " always caps)");
  const auto head_dim = c.resolved_head_dim();
  if (c.query_pre_attn_scalar != 0 && c.query_pre_attn_scalar != static_cast<double>(head_dim))
    refuse(a, "query_pre_attn_scalar", dew::str("is ", c.query_pre_attn_scalar, " (llama.cpp scales by head_dim ", head_dim, "^-0.5)"));
  if (!c.causal) refuse(a, "causal", "is false (bidirectional attention)");
  if (c.num_experts > 0) refuse(a, "num_experts", dew::str("is ", c.num_experts, " (a mixture of experts; export it as hf)"));
  if (c.rope_scaling.type != "none" && c.rope_scaling.type != "linear")
    refuse(a, "rope_scaling.type", "is \"" + c.rope_scaling.type + "\" (dew writes none or linear; no rope_freqs or rope_factors tensors)");
  if (c.positions == "rotary" && head_dim % 2 != 0) refuse(a, "head_dim", "is odd");
  if (c.dtype != "float32" && c.dtype != "bfloat16" && c.dtype != "float16") refuse(a, "dtype", "is \"" + c.dtype + "\"");
}

// Per-layer windows and rotary bases the row's sliding keys can say.
void refuse_sliding(const GgufArchitecture& a, const CausalTransformerConfig& c) {
  std::int64_t window = 0;
  for (std::int64_t layer = 0; layer < c.num_layers; ++layer) {
    const auto w = c.window_of_layer(layer);
    const auto theta = c.kind_rope_theta_of_layer(layer);
    const std::string at = "layer " + std::to_string(layer);
    if (w > 0 && a.sliding == GgufSliding::none) refuse(a, "layer_types", "give " + at + dew::str(" a sliding window of ", w));
    if (w > 0 && window > 0 && w != window) refuse(a, "kinds", dew::str("have windows ", window, " and ", w, " (one attention.sliding_window)"));
    if (w > 0) window = w;
    if (w == 0 && a.sliding == GgufSliding::all && window > 0) refuse(a, "layer_types", "slide on some layers only (" + a.name + " slides on all or none)");
    if (theta != 0 && (w == 0 || a.sliding != GgufSliding::pattern)) refuse(a, "kinds", "give " + at + " its own rope_theta");
    if (theta != 0 && a.default_local_theta == 0.0 && c.rope_scaling.type != "none")
      refuse(a, "kinds", "give " + at + " an unscaled rope_theta while rope_scaling is set (" + a.name + " scales the sliding layers too)");
    if (w > 0 && theta == 0 && a.default_local_theta != 0.0 && c.rope_scaling.type != "none")
      refuse(a, "kinds.sliding_attention.rope_theta", "is unset while rope_scaling is set (" + a.name + "'s sliding layers are unscaled)");
  }
  if (a.sliding == GgufSliding::all && window > 0 && c.window_of_layer(0) == 0)
    refuse(a, "layer_types", "slide on some layers only (" + a.name + " slides on all or none)");
}

void write_sliding(const GgufArchitecture& a, const CausalTransformerConfig& c, formats::GgufWriter& w) {
  std::int64_t window = 0;
  double local = 0.0;
  std::vector<formats::GgufValue> pattern;  // one bool per layer, as Olmo2Model writes it (load_swa_pattern reads it)
  for (std::int64_t layer = 0; layer < c.num_layers; ++layer) {
    if (c.window_of_layer(layer) > 0) {
      window = c.window_of_layer(layer);
      local = c.kind_rope_theta_of_layer(layer);
    }
    pattern.push_back(formats::GgufValue::boolean(c.window_of_layer(layer) > 0));
  }
  if (a.sliding == GgufSliding::all) {
    w.set_uint32(key(a, "attention.sliding_window"), static_cast<std::uint32_t>(window));  // 0 = none, as the converter writes
    return;
  }
  // No sliding layer: gemma3 reads no window as none; gemma2 always slides unless the pattern says no layer does.
  if (window == 0 && a.default_window == 0) return;
  w.set_uint32(key(a, "attention.sliding_window"), static_cast<std::uint32_t>(window > 0 ? window : a.default_window));
  w.set(key(a, "attention.sliding_window_pattern"), formats::GgufValue::array(formats::GgufType::Bool, std::move(pattern)));
  if (local != 0.0 || a.default_local_theta != 0.0)
    w.set_float32(key(a, "rope.freq_base_swa"), static_cast<float>(local != 0.0 ? local : c.rope_theta));
}

}  // namespace

void refuse_gguf_features(const GgufArchitecture& a, const CausalTransformerConfig& c) {
  refuse_block(a, c);
  refuse_scores(a, c);
  refuse_sliding(a, c);
}

void write_gguf_features(const GgufArchitecture& a, const CausalTransformerConfig& c, formats::GgufWriter& w) {
  const auto f32 = [](double v) { return static_cast<float>(v); };
  w.set_float32(key(a, a.layer_norm ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon"), f32(c.norm_eps));
  if (!a.learned_positions) {
    w.set_float32(key(a, "rope.freq_base"), f32(c.rope_theta));
    if (a.write_rope_dims || c.resolved_rotary_dim() != c.resolved_head_dim())
      w.set_uint32(key(a, "rope.dimension_count"), static_cast<std::uint32_t>(c.resolved_rotary_dim()));
    if (c.rope_scaling.type == "linear") {
      w.set_string(key(a, "rope.scaling.type"), "linear");
      w.set_float32(key(a, "rope.scaling.factor"), f32(c.rope_scaling.factor));
    }
  }
  if (a.attn_softcap) w.set_float32(key(a, "attn_logit_softcapping"), f32(c.attn_logit_softcap));
  if (a.final_softcap && (c.final_logit_softcap > 0 || a.default_final_softcap > 0))
    w.set_float32(key(a, "final_logit_softcapping"), f32(c.final_logit_softcap));
  if (a.parallel_residual) w.set_bool(key(a, "use_parallel_residual"), c.parallel_residual);
  if (a.multipliers) {
    const double head_dim = static_cast<double>(c.resolved_head_dim());
    w.set_float32(key(a, "attention.scale"), f32(c.attention_scale > 0 ? c.attention_scale : 1.0 / std::sqrt(head_dim)));
    w.set_float32(key(a, "embedding_scale"), f32(c.embedding_scale));
    w.set_float32(key(a, "residual_scale"), f32(c.residual_multiplier));
    w.set_float32(key(a, "logit_scale"), f32(c.logits_scaling));
  }
  if (a.sliding != GgufSliding::none) write_sliding(a, c, w);
}

}  // namespace dew::interop
