#pragma once
// Rotary position embeddings in the rotate-half layout Hugging Face Llama uses. The angles are computed
// in fp32 from integer positions (so packed rows, whose positions restart per document, rotate right),
// then cast to the compute dtype as transformers does.
#include <ATen/ATen.h>

#include "dew/nn/causal_transformer_config.h"

namespace dew::nn {

struct RotaryAngles {
  at::Tensor cos, sin;  // [B, 1, S, head_dim], compute dtype
};

// The fp32 inverse frequencies [head_dim / 2], exactly as transformers builds them for the scaling type.
at::Tensor rotary_inv_freq(std::int64_t head_dim, double theta, const RopeScaling& scaling, c10::Device device);

RotaryAngles rotary_angles(const at::Tensor& positions, const at::Tensor& inv_freq, c10::ScalarType dtype);

// longrope (Phi-3): 1 / (factor[i] * theta^(2i/d)) with long_factor (`long_rows`) or short_factor, in fp32 as
// transformers' _compute_longrope_parameters builds them.
at::Tensor longrope_inv_freq(std::int64_t head_dim, double theta, const RopeScaling& scaling, bool long_rows, c10::Device device);

// longrope's angles: row b rotates with long_factor when lengths[b] > original_max_position_embeddings, else
// with short_factor, and cos / sin are multiplied by attention_factor before the cast (Phi3RotaryEmbedding).
// transformers picks one set for the whole batch by max(position_ids) + 1; dew picks per row (the decoder's
// caller says by which length, DecoderInputs::rope_lengths), so a row computes what it computes alone, as
// transformers' generate computes each prompt.
RotaryAngles longrope_angles(const at::Tensor& positions, const at::Tensor& lengths, std::int64_t head_dim, double theta,
                             const RopeScaling& scaling, c10::ScalarType dtype);
// Unscaled frequencies with base theta.
RotaryAngles rotary_angles(const at::Tensor& positions, std::int64_t head_dim, double theta, c10::ScalarType dtype);

// x: [B, heads, S, head_dim]. Float32 on the CPU runs a fused kernel: one pass forward and one backward (the
// transposed rotation), where the ATen composition (narrow, neg, cat, two muls, add) allocates four
// temporaries and saves two of them; a transposed view of [B, S, heads, head_dim] memory keeps that layout.
// Values: the same products as the composition, summed with at most one rounding less where the compiler
// fuses a multiply-add (a float32 ulp). Other devices and dtypes take the composition.
at::Tensor apply_rotary(const at::Tensor& x, const RotaryAngles& angles);

// The ATen composition, on any device and dtype (what the fused kernel is checked against).
at::Tensor apply_rotary_reference(const at::Tensor& x, const RotaryAngles& angles);

}  // namespace dew::nn
