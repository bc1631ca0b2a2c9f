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
struct LayerKind {
  std::int64_t window = 0;
  template <class V>
  void fields(V& v) {
    v("window", window, "keys each query attends to, its own included; 0 = all");
  }
};

struct CausalTransformerConfig {
  std::int64_t vocab_size = 0;
  std::int64_t emb_features = 256;
  std::int64_t num_layers = 4;
  std::int64_t num_heads = 4;
  std::int64_t num_kv_heads = 0;  // 0 = num_heads (no grouping)
  std::int64_t head_dim = 0;      // 0 = emb_features / num_heads
  std::string mlp = "swiglu";     // swiglu | geglu | gelu
  std::int64_t mlp_features = 0;  // 0 = 4 * emb_features
  std::int64_t max_seq_len = 256;
  double rope_theta = 10000.0;
  std::vector<std::string> layer_types;         // empty = every layer "full_attention"
  std::map<std::string, LayerKind> kinds;       // what each non-full kind does
  double norm_eps = 1e-6;
  bool qk_norm = true;
  bool attention_bias = false;
  bool tie_embeddings = true;
  double embedding_scale = 1.0;  // multiplies the embeddings (Gemma uses sqrt(emb_features))
  double final_logit_softcap = 0.0;  // 0 = off; else logits = cap * tanh(logits / cap)
  bool causal = true;               // false = bidirectional (masked diffusion)
  std::string dtype = "float32";        // compute: float32 | bfloat16 | float16
  std::string param_dtype = "float32";  // storage of the parameters

  template <class V>
  void fields(V& v) {
    v("vocab_size", vocab_size, "token ids are in [0, vocab_size); 0 = take it from the data's meta.json");
    v("emb_features", emb_features, "width of the residual stream");
    v("num_layers", num_layers, "decoder blocks");
    v("num_heads", num_heads, "query heads");
    v("num_kv_heads", num_kv_heads, "key/value heads (grouped-query attention); 0 = num_heads");
    v("head_dim", head_dim, "features per head; 0 = emb_features / num_heads");
    v("mlp", mlp, "swiglu, geglu or gelu");
    v("mlp_features", mlp_features, "hidden width of the MLP; 0 = 4 * emb_features");
    v("max_seq_len", max_seq_len, "longest sequence (positions) the model accepts");
    v("rope_theta", rope_theta, "rotary position base");
    v("layer_types", layer_types, "kind of each layer, e.g. [\"sliding_attention\", \"full_attention\"]; empty = all full");
    v("kinds", kinds, "what each layer kind does: {\"sliding_attention\": {\"window\": 8}}");
    v("norm_eps", norm_eps, "RMSNorm epsilon");
    v("qk_norm", qk_norm, "RMSNorm on each head's queries and keys (Qwen3, Gemma 3)");
    v("attention_bias", attention_bias, "biases on the q/k/v projections");
    v("tie_embeddings", tie_embeddings, "the output projection reuses the embedding matrix");
    v("embedding_scale", embedding_scale, "multiplier on the token embeddings");
    v("final_logit_softcap", final_logit_softcap, "0 = off; else cap * tanh(logits / cap)");
    v("causal", causal, "false gives bidirectional attention");
    v("dtype", dtype, "compute dtype: float32, bfloat16 or float16");
    v("param_dtype", param_dtype, "parameter storage dtype");
  }

  std::int64_t resolved_kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_heads; }
  std::int64_t resolved_head_dim() const { return head_dim > 0 ? head_dim : emb_features / num_heads; }
  std::int64_t resolved_mlp_features() const { return mlp_features > 0 ? mlp_features : 4 * emb_features; }
  // The window of layer i (0 = full attention).
  std::int64_t window_of_layer(std::int64_t layer) const;
  // Refuses inconsistent settings by field name (heads not dividing, unknown kinds, bad dtype, ...).
  void validate() const;
};

}  // namespace dew::nn
