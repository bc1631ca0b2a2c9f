#include "dew/nn/decoder_flops.h"

namespace dew::nn {

double decoder_flops_per_token(const CausalTransformerConfig& c, std::int64_t seq_len) {
  const double E = static_cast<double>(c.emb_features), L = static_cast<double>(c.num_layers);
  const double H = static_cast<double>(c.num_heads), KV = static_cast<double>(c.resolved_kv_heads());
  const double D = static_cast<double>(c.resolved_head_dim()), F = static_cast<double>(c.resolved_mlp_features());
  const double attention = E * H * D * 2 + E * KV * D * 2;  // q, o and k, v projections
  const double mlp = (c.mlp == "swiglu" || c.mlp == "geglu" ? 3.0 : 2.0) * E * F;
  const double output = E * static_cast<double>(c.vocab_size);
  const double matrices = L * (attention + mlp) + output;
  return 6.0 * matrices + 12.0 * L * H * D * static_cast<double>(seq_len);
}

}  // namespace dew::nn
