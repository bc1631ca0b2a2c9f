#include "dew/nn/decoder_flops.h"

namespace dew::nn {

double decoder_flops_per_token(const CausalTransformerConfig& c, std::int64_t seq_len) {
  const double E = static_cast<double>(c.emb_features), L = static_cast<double>(c.num_layers);
  const double H = static_cast<double>(c.num_heads), KV = static_cast<double>(c.resolved_kv_heads());
  const double D = static_cast<double>(c.resolved_head_dim()), F = static_cast<double>(c.resolved_mlp_features());
  const double attention = E * H * D * 2 + E * KV * D * 2;  // q, o and k, v projections
  const double mlp = (c.mlp == "swiglu" || c.mlp == "geglu" ? 3.0 : 2.0) * E * F;
  // A mixture-of-experts layer multiplies each token by its router and its experts_per_token experts (and the
  // shared expert with its gate): the active parameters, not all of them.
  const double X = static_cast<double>(c.resolved_expert_features()), S = static_cast<double>(c.shared_expert_features);
  const double moe = E * static_cast<double>(c.num_experts) + static_cast<double>(c.experts_per_token) * 3.0 * E * X +
                     (S > 0 ? 3.0 * E * S + E : 0.0);
  const double output = E * static_cast<double>(c.vocab_size);
  double matrices = output + L * attention;
  for (std::int64_t i = 0; i < c.num_layers; ++i) matrices += c.is_moe_layer(i) ? moe : mlp;
  return 6.0 * matrices + 12.0 * L * H * D * static_cast<double>(seq_len);
}

}  // namespace dew::nn
