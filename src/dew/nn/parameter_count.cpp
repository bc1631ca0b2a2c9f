#include "dew/nn/parameter_count.h"

#include <limits>

namespace dew::nn {

std::int64_t parameter_count(const CausalTransformerConfig& c) {
  // In double: a mistyped config (emb_features = 1e10) must give a huge count, not a wrapped one.
  // Mirrors the modules' constructors (causal_transformer.cpp, attention.cpp, layers.cpp).
  const double e = static_cast<double>(c.emb_features), v = static_cast<double>(c.vocab_size);
  const double d = static_cast<double>(c.resolved_head_dim()), f = static_cast<double>(c.resolved_mlp_features());
  const double q = static_cast<double>(c.num_heads) * d, kv = static_cast<double>(c.resolved_kv_heads()) * d;
  double attention = e * q + 2 * e * kv + q * e;
  if (c.attention_bias) attention += q + 2 * kv;
  if (c.attention_output_bias) attention += e;
  if (c.qk_norm) attention += c.qk_norm_per_head ? 2 * d : q + kv;
  const bool gated = c.mlp == "swiglu" || c.mlp == "geglu";
  const double projections = gated ? 3 : 2;
  double mlp = projections * e * f;
  if (c.mlp_bias) mlp += (projections - 1) * f + e;
  // A mixture-of-experts layer (nn/mixture_of_experts.h): the router, every expert's gated MLP, and the
  // shared expert with its one-output gate.
  const double x = static_cast<double>(c.resolved_expert_features()), s = static_cast<double>(c.shared_expert_features);
  const double moe = static_cast<double>(c.num_experts) * (e + 3 * e * x) + (s > 0 ? 3 * e * s + e : 0);
  const double per_norm = c.norm == "layernorm" ? 2 * e : e;  // LayerNorm has a bias
  const double norms = (c.sandwich_norms ? (c.pre_norms ? 4 : 2) : 2) * per_norm;
  double total = v * e + per_norm;
  for (std::int64_t i = 0; i < c.num_layers; ++i) total += attention + (c.is_moe_layer(i) ? moe : mlp) + norms;
  if (c.positions == "learned") total += static_cast<double>(c.max_seq_len) * e;
  if (!c.tie_embeddings) total += v * e;
  if (total >= static_cast<double>(std::numeric_limits<std::int64_t>::max())) return std::numeric_limits<std::int64_t>::max();
  return static_cast<std::int64_t>(total);
}

}  // namespace dew::nn
