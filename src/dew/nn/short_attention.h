#pragma once
// Attention over short sequences -- image patches (8-64 tokens), a 128-token training row -- computed per
// (batch, head) with the whole score matrix in cache, forward and backward. ATen's CPU flash kernel tiles
// for long sequences; at these lengths it runs at a few percent of the matmul peak (`fused_layers_bench
// --only attention`: 49 patches of 32 dims a head, it takes 2.3x this kernel's time; 8-17 tokens, 3.5-5x),
// and attention was a quarter of a JEPA step and a sixth of a DiT step.
// Causal rows keep their scores by query; the others key-major, so their softmax over the keys is
// element-wise over vectors of 16 queries (no horizontal reductions: 1.3-1.4x on JEPA's 17-token predictor).
#include <ATen/ATen.h>

#include <cstdint>

#include "dew/nn/kernels/short_attention.h"

namespace dew::nn {

// The longest sequence the kernel takes (its score matrix per head fits in cache); longer ones go to
// scaled_dot_product_attention.
constexpr std::int64_t kShortAttentionMaxTokens = kernels::kMaxTokens;

// Whether short_attention takes these: float32 CPU tensors q [B, H, N, hd], k and v [B, Hkv, N, hd] with
// H a multiple of Hkv (grouped-query), as many keys as queries, N <= kShortAttentionMaxTokens, hd <= 256.
bool short_attention_applies(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

// softmax(q k^T * scale, causal or not) v, differentiable in q, k and v. Any strides whose last is 1 (the
// views a packed qkv projection gives). Returns [B, H, N, hd] as the transpose of a contiguous
// [B, N, H, hd], so the caller's out.transpose(1, 2).reshape({B, N, H * hd}) copies nothing.
at::Tensor short_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, double scale);

// The same attention straight from a packed projection qkv [B, N, 3 * H * hd] (q, k, v in that order, the
// heads inside each, as PatchAttention's qkv Linear gives it): returns [B, N, H * hd], and the gradient is
// one [B, N, 3 * H * hd] tensor, so no stack of three gradients and no transposed copy follow.
bool short_attention_packed_applies(const at::Tensor& qkv, std::int64_t heads);
at::Tensor short_attention_packed(const at::Tensor& qkv, std::int64_t heads, bool causal, double scale);

// short_attention where it applies, else ATen's scaled_dot_product_attention (same arguments, no mask, no
// dropout). scale <= 0 means 1 / sqrt(hd).
at::Tensor attention_short_or_sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, double scale = 0);

// The same attention written out in ATen ops (float64 inside): the tests' reference.
at::Tensor attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, double scale);

}  // namespace dew::nn
