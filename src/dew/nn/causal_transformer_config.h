#pragma once
// The decoder's configuration: the spec's CausalTransformer fields, as a config struct (JSON round trip,
// --set model.X=...). Zero in a derived field (num_kv_heads, head_dim, mlp_features) means "derive it".
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dew::nn {

// What a kind of layer does. window = 0 attends to every earlier key; window = W attends to W keys,
// its own included (the spec's LayerKind(window=8)).
// rope_theta > 0 gives the kind its own rotary base with plain (unscaled) frequencies: Gemma 3's local
// layers use 10k while its global layers use 1M with the model's rope_scaling.
struct LayerKind {
  std::int64_t window = 0;
  double rope_theta = 0.0;
  template <class V>
  void fields(V& v) {
    v("window", window, "keys each query attends to, its own included; 0 = all");
    v("rope_theta", rope_theta, "rotary base of this kind's layers, unscaled; 0 = the model's rope_theta and rope_scaling");
  }
};

// How the rotary frequencies are stretched for contexts longer than training (Hugging Face's rope_scaling):
//   none    1 / theta^(2i/d)
//   linear  those divided by factor (positions interpolated)
//   llama3  Llama 3.1's: low frequencies divided by factor, high ones kept, a smooth blend between,
//           the bands set by low_freq_factor, high_freq_factor and original_max_position_embeddings.
//   longrope  Phi-3's: frequency i divided by short_factor[i] while a row is at most
//           original_max_position_embeddings tokens long, by long_factor[i] beyond (rotary.h says which length
//           decides), and cos / sin multiplied by attention_factor.
struct RopeScaling {
  std::string type = "none";
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  std::int64_t original_max_position_embeddings = 8192;
  std::vector<double> short_factor, long_factor;  // longrope: one per rotating pair (rotary dims / 2)
  double attention_factor = 1.0;                  // longrope: cos and sin scaled by it
  template <class V>
  void fields(V& v) {
    v("type", type, "none, linear, llama3 or longrope");
    v("factor", factor, "frequency divisor (linear, llama3); longrope: the context stretch, max_seq_len / original_max_position_embeddings");
    v("low_freq_factor", low_freq_factor, "llama3: wavelengths above original_max_position_embeddings / this are divided by factor");
    v("high_freq_factor", high_freq_factor, "llama3: wavelengths below original_max_position_embeddings / this are kept");
    v("original_max_position_embeddings", original_max_position_embeddings,
      "llama3, longrope: the context length trained before scaling");
    v("short_factor", short_factor, "longrope: per-frequency divisors for rows up to original_max_position_embeddings long");
    v("long_factor", long_factor, "longrope: per-frequency divisors for longer rows");
    v("attention_factor", attention_factor, "longrope: cos and sin multiplied by it (sqrt(1 + ln factor / ln original) by default)");
  }
};

struct CausalTransformerConfig {
  std::int64_t vocab_size = 0;
  std::int64_t emb_features = 256;
  std::int64_t num_layers = 4;
  std::int64_t num_heads = 4;
  std::int64_t num_kv_heads = 0;  // 0 = num_heads (no grouping)
  std::int64_t head_dim = 0;      // 0 = emb_features / num_heads
  std::string mlp = "swiglu";     // swiglu | geglu | gelu (tanh, ungated) | gelu_erf (exact, ungated)
  std::int64_t mlp_features = 0;  // 0 = 4 * emb_features
  std::int64_t max_seq_len = 256;
  std::string positions = "rotary";  // rotary | learned (GPT-2: a table of max_seq_len position embeddings)
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  std::int64_t rotary_dim = 0;  // features of a head that rotate (the first ones); 0 = all (GPT-NeoX, Phi-3: fewer)
  std::vector<std::string> layer_types;         // empty = every layer "full_attention"
  std::map<std::string, LayerKind> kinds;       // what each non-full kind does
  std::string norm = "rmsnorm";  // rmsnorm | layernorm (with a bias: GPT-2, GPT-NeoX)
  double norm_eps = 1e-6;
  bool qk_norm = true;
  bool qk_norm_per_head = true;  // false: q/k norms over the whole projection (OLMo 2), not each head
  bool attention_bias = false;
  bool attention_output_bias = false;  // Llama/Gemma with attention_bias have it; Qwen2 has q/k/v biases only
  bool mlp_bias = false;
  double norm_weight_offset = 0.0;  // RMSNorm scales by (offset + weight); Gemma stores weight - 1 and uses 1
  bool sandwich_norms = false;       // Gemma 2/3: norms after attention and MLP as well as before
  bool pre_norms = true;             // false (with sandwich_norms): only the norms after each sublayer (OLMo 2)
  bool parallel_residual = false;    // x + attn(norm1(x)) + mlp(norm2(x)) (GPT-NeoX)
  double residual_multiplier = 1.0;  // each sublayer's output is scaled by this before its residual add (Granite)
  double attention_scale = 0.0;      // attention scores' scale; 0 = query_pre_attn_scalar^-0.5 or head_dim^-0.5 (Granite sets it)
  double logits_scaling = 1.0;       // logits are divided by this (Granite)
  double attn_logit_softcap = 0.0;  // 0 = off; else attention scores = cap * tanh(scores / cap) (Gemma 2)
  double query_pre_attn_scalar = 0.0;  // attention scale is this^-0.5; 0 = head_dim (Gemma 2/3 set it)
  bool tie_embeddings = true;
  double embedding_scale = 1.0;  // multiplies the embeddings (Gemma uses sqrt(emb_features))
  double final_logit_softcap = 0.0;  // 0 = off; else logits = cap * tanh(logits / cap)
  bool causal = true;               // false = bidirectional (masked diffusion)
  std::int64_t mask_token_id = -1;  // masked diffusion: the id that marks a masked position; -1 = none
  bool shift_logits = false;        // masked diffusion: position i's logits predict token i + 1 (Dream)
  std::string dtype = "float32";        // compute: float32 | bfloat16 | float16
  std::string param_dtype = "float32";  // storage of the parameters
  // The residual stream between blocks. float32 with a bfloat16 `dtype` is mixed precision as
  // torch.autocast does it: matmuls and attention in bfloat16, the sums of the blocks' outputs in float32,
  // so the small updates a block (or a LoRA adapter) adds are not rounded away. Equal to dtype = the
  // stream in the compute dtype (a bfloat16 model run as Hugging Face runs it without autocast).
  std::string residual_dtype = "float32";
  // Mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE): 0 experts = a dense decoder. On an MoE layer the MLP
  // is replaced by a router picking experts_per_token of num_experts gated MLPs per token, their outputs
  // summed weighted by the router's probabilities (renormalised over the chosen ones with norm_topk_prob).
  std::int64_t num_experts = 0;
  std::int64_t experts_per_token = 2;
  std::int64_t expert_features = 0;       // 0 = mlp_features
  bool norm_topk_prob = true;             // Mixtral: true; Qwen2/3-MoE: their config's norm_topk_prob
  std::int64_t shared_expert_features = 0;  // 0 = none; else a gated MLP every token passes, scaled by sigmoid(gate)
  std::int64_t moe_layer_step = 1;        // layer i is MoE when (i + 1) % step == 0 (Qwen's decoder_sparse_step)
  std::vector<std::int64_t> dense_layers;  // layers that keep the dense MLP (Qwen's mlp_only_layers)
  double router_aux_loss_coef = 0.001;    // training: loss += coef * load-balancing loss (transformers' default)
  double router_z_loss_coef = 0.0;        // training: loss += coef * mean(logsumexp(router logits)^2) (ST-MoE)

  template <class V>
  void fields(V& v) {
    v("vocab_size", vocab_size, "token ids are in [0, vocab_size); 0 = take it from the data's meta.json");
    v("emb_features", emb_features, "width of the residual stream");
    v("num_layers", num_layers, "decoder blocks");
    v("num_heads", num_heads, "query heads");
    v("num_kv_heads", num_kv_heads, "key/value heads (grouped-query attention); 0 = num_heads");
    v("head_dim", head_dim, "features per head; 0 = emb_features / num_heads");
    v("mlp", mlp, "swiglu, geglu, gelu (tanh approximation, ungated) or gelu_erf (exact, ungated)");
    v("mlp_features", mlp_features, "hidden width of the MLP; 0 = 4 * emb_features");
    v("max_seq_len", max_seq_len, "longest sequence (positions) the model accepts");
    v("positions", positions, "rotary (rotary positions in attention) or learned (a position embedding table added to the tokens', GPT-2)");
    v("rope_theta", rope_theta, "rotary position base");
    v("rope_scaling", rope_scaling, "rotary frequency scaling for long contexts: {\"type\": \"llama3\", \"factor\": 8, ...}");
    v("rotary_dim", rotary_dim, "features of each head that rotate, the first ones (partial rotary: GPT-NeoX, Phi-3); 0 = all");
    v("layer_types", layer_types, "kind of each layer, e.g. [\"sliding_attention\", \"full_attention\"]; empty = all full");
    v("kinds", kinds, "what each layer kind does: {\"sliding_attention\": {\"window\": 8}}");
    v("norm", norm, "rmsnorm, or layernorm (LayerNorm with a bias: GPT-2, GPT-NeoX)");
    v("norm_eps", norm_eps, "the norms' epsilon");
    v("qk_norm", qk_norm, "RMSNorm on each head's queries and keys (Qwen3, Gemma 3)");
    v("qk_norm_per_head", qk_norm_per_head, "false: the q/k norms normalise the whole projection, all heads at once (OLMo 2)");
    v("attention_bias", attention_bias, "biases on the q/k/v projections");
    v("attention_output_bias", attention_output_bias, "a bias on the attention output projection (o_proj)");
    v("mlp_bias", mlp_bias, "biases on the MLP projections");
    v("norm_weight_offset", norm_weight_offset, "RMSNorm multiplies by (offset + weight); Gemma uses 1 (weights stored minus one)");
    v("sandwich_norms", sandwich_norms,
      "Gemma 2/3 blocks: post_attention_layernorm on the attention output, pre_/post_feedforward_layernorm around the MLP");
    v("pre_norms", pre_norms, "false (with sandwich_norms): no norms before the sublayers, only after them (OLMo 2)");
    v("parallel_residual", parallel_residual, "attention and MLP both read the block's input: x + attn(norm1(x)) + mlp(norm2(x)) (GPT-NeoX)");
    v("residual_multiplier", residual_multiplier, "each sublayer's output is multiplied by this before its residual add (Granite)");
    v("attention_scale", attention_scale, "scale of the attention scores; 0 = query_pre_attn_scalar^-0.5, else head_dim^-0.5 (Granite's attention_multiplier)");
    v("logits_scaling", logits_scaling, "the logits are divided by this (Granite)");
    v("attn_logit_softcap", attn_logit_softcap, "0 = off; else attention scores become cap * tanh(scores / cap)");
    v("query_pre_attn_scalar", query_pre_attn_scalar, "attention scores are scaled by this^-0.5; 0 = head_dim");
    v("tie_embeddings", tie_embeddings, "the output projection reuses the embedding matrix");
    v("embedding_scale", embedding_scale, "multiplier on the token embeddings");
    v("final_logit_softcap", final_logit_softcap, "0 = off; else cap * tanh(logits / cap)");
    v("causal", causal, "false gives bidirectional attention");
    v("mask_token_id", mask_token_id, "masked-diffusion models: the id of the mask token (needs causal = false); -1 = none");
    v("shift_logits", shift_logits,
      "masked-diffusion models: the logits at position i predict token i + 1, as in Dream (kept from its autoregressive parent)");
    v("dtype", dtype, "compute dtype: float32, bfloat16 or float16");
    v("param_dtype", param_dtype, "parameter storage dtype");
    v("residual_dtype", residual_dtype,
      "dtype of the residual stream between blocks: float32 keeps bfloat16/float16 compute as mixed precision");
    v("num_experts", num_experts, "experts of each mixture-of-experts layer; 0 = dense MLPs (no experts)");
    v("experts_per_token", experts_per_token, "experts the router picks for each token (top-k)");
    v("expert_features", expert_features, "hidden width of each expert's gated MLP; 0 = mlp_features");
    v("norm_topk_prob", norm_topk_prob, "renormalise the chosen experts' probabilities to sum to 1 (Mixtral: true)");
    v("shared_expert_features", shared_expert_features,
      "hidden width of a shared expert every token passes, scaled by a sigmoid gate (Qwen2-MoE); 0 = none");
    v("moe_layer_step", moe_layer_step, "layer i has experts when (i + 1) % moe_layer_step == 0 (Qwen's decoder_sparse_step)");
    v("dense_layers", dense_layers, "layers that keep a dense MLP although the step would give them experts (Qwen's mlp_only_layers)");
    v("router_aux_loss_coef", router_aux_loss_coef, "training adds this times the router's load-balancing loss (Switch/Mixtral)");
    v("router_z_loss_coef", router_z_loss_coef, "training adds this times the router z-loss, mean(logsumexp(router logits)^2) (ST-MoE)");
  }

  std::int64_t resolved_kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_heads; }
  std::int64_t resolved_head_dim() const { return head_dim > 0 ? head_dim : emb_features / num_heads; }
  std::int64_t resolved_rotary_dim() const { return rotary_dim > 0 ? rotary_dim : resolved_head_dim(); }
  std::int64_t resolved_mlp_features() const { return mlp_features > 0 ? mlp_features : 4 * emb_features; }
  std::int64_t resolved_expert_features() const { return expert_features > 0 ? expert_features : resolved_mlp_features(); }
  // Whether layer i's MLP is a mixture of experts.
  bool is_moe_layer(std::int64_t layer) const;
  bool has_moe() const { return num_experts > 0; }
  // The window of layer i (0 = full attention).
  std::int64_t window_of_layer(std::int64_t layer) const;
  // The rotary base layer i uses with its own kind's base (unscaled), or 0 for the model's rope_theta and rope_scaling.
  double kind_rope_theta_of_layer(std::int64_t layer) const;
  // Refuses inconsistent settings by field name (heads not dividing, unknown kinds, bad dtype, ...).
  void validate() const;
};

}  // namespace dew::nn
