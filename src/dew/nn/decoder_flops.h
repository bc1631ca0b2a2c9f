#pragma once
// The arithmetic a decoder does per token, from its config alone (for MFU and benchmarks).
#include <cstdint>

#include "dew/nn/causal_transformer_config.h"

namespace dew::nn {

// Training FLOPs per token of a decoder at `seq_len` (PaLM's count): 6 * N + 12 * L * H * head_dim * S,
// where N counts the matrices a token multiplies by (every parameter except the input embedding, plus the
// output projection, which is the embedding matrix when tied) and the second term is attention.
double decoder_flops_per_token(const CausalTransformerConfig& config, std::int64_t seq_len);

}  // namespace dew::nn
