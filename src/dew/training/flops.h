#pragma once
// Model FLOPs utilisation (MFU): the FLOPs a step must do by the model's arithmetic, divided by what the
// machine can do. The numerator counts the usual 6 FLOPs per parameter per token (forward 2, backward 4)
// plus the attention score/value products; the denominator is a peak measured with a short matmul.
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>

#include "dew/nn/causal_transformer_config.h"

namespace dew::training {

// Training FLOPs per token of a decoder at `seq_len` (PaLM's count): 6 * N + 12 * L * H * head_dim * S,
// where N counts the matrices a token multiplies by (every parameter except the input embedding, plus the
// output projection, which is the embedding matrix when tied) and the second term is attention.
double decoder_flops_per_token(const nn::CausalTransformerConfig& config, std::int64_t seq_len);

// Best-of-a-few square matmul throughput on `device` in `dtype` (FLOP/s), about 0.2-0.5 s of work. A
// practical ceiling for MFU: what this machine's BLAS reaches, not the data-sheet number.
double measure_peak_flops(c10::Device device, c10::ScalarType dtype);

}  // namespace dew::training
