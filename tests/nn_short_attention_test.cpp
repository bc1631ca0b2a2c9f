// The short-sequence attention kernel (nn/short_attention.h) against attention written out in float64:
// outputs and the gradients of q, k and v, causal or not, grouped-query, head sizes and lengths that are
// not multiples of the kernel's 16 lanes, the strided views a packed qkv projection gives, the packed
// entry itself, and the dispatch to ATen's kernel beyond its range.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>

#include "dew/nn/short_attention.h"
#include "float_bounds.h"

namespace {

using dew::test::kUlp;
using dew::test::expect_normwise_close;

// Normwise bound, derived: every result is at most three float32 products or sums in a chain (scores,
// softmax, the weighted sum; for gradients dO V^T, the softmax's backward, then dS K or dS^T Q), each a
// reduction over at most max(N, hd) terms, which errs by at most that many roundings relative to the sum
// of magnitudes; exp adds ~2u. 8 (N + hd) u covers the chain with room, and a wrong index or a missing term
// errs by O(1), far above it.
double bound(std::int64_t N, std::int64_t hd) { return 8.0 * static_cast<double>(N + hd) * kUlp; }

struct Case {
  std::int64_t B, H, Hkv, N, hd;
  bool causal;
};

// q, k, v as leaves of a packed [B, N, H + 2 Hkv, hd] projection, viewed [B, heads, N, hd] as the patch and
// decoder layers view theirs (last stride 1, the others not contiguous).
struct Inputs {
  at::Tensor packed, q, k, v;
};

Inputs packed_inputs(const Case& c, std::uint64_t seed) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  Inputs in;
  in.packed = at::randn({c.B, c.N, c.H + 2 * c.Hkv, c.hd}, generator).requires_grad_(true);
  auto heads = in.packed.transpose(1, 2);  // [B, heads, N, hd]
  in.q = heads.narrow(1, 0, c.H);
  in.k = heads.narrow(1, c.H, c.Hkv);
  in.v = heads.narrow(1, c.H + c.Hkv, c.Hkv);
  return in;
}

void check_case(const Case& c) {
  SCOPED_TRACE(testing::Message() << "B " << c.B << " H " << c.H << " Hkv " << c.Hkv << " N " << c.N << " hd " << c.hd
                                  << (c.causal ? " causal" : ""));
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.hd));
  auto got_in = packed_inputs(c, 7), want_in = packed_inputs(c, 7);
  ASSERT_TRUE(dew::nn::short_attention_applies(got_in.q, got_in.k, got_in.v));
  const auto got = dew::nn::short_attention(got_in.q, got_in.k, got_in.v, c.causal, scale);
  const auto want = dew::nn::attention_reference(want_in.q, want_in.k, want_in.v, c.causal, scale);
  expect_normwise_close(got, want, bound(c.N, c.hd), "output");
  // The output is the transpose of a contiguous [B, N, H, hd]: the caller's reshape to [B, N, H * hd] is a view.
  EXPECT_TRUE(got.transpose(1, 2).is_contiguous());

  auto grad = at::randn(got.sizes(), at::make_generator<at::CPUGeneratorImpl>(11));
  (got * grad).sum().backward();
  (want * grad).sum().backward();
  expect_normwise_close(got_in.packed.grad(), want_in.packed.grad(), bound(c.N, c.hd), "gradient of q, k and v");

  // With as many key/value heads as query heads the projection is the packed [B, N, 3 H hd] the patch
  // layers hand over whole: the packed entry computes the same numbers, its gradient in that layout.
  if (c.H == c.Hkv) {
    auto packed = got_in.packed.detach().reshape({c.B, c.N, 3 * c.H * c.hd}).clone().requires_grad_(true);
    ASSERT_TRUE(dew::nn::short_attention_packed_applies(packed, c.H));
    const auto out = dew::nn::short_attention_packed(packed, c.H, c.causal, scale);
    EXPECT_TRUE(at::equal(out, got.detach().transpose(1, 2).reshape({c.B, c.N, c.H * c.hd})));
    (out * grad.transpose(1, 2).reshape({c.B, c.N, c.H * c.hd})).sum().backward();
    EXPECT_TRUE(at::equal(packed.grad().view(got_in.packed.sizes()), got_in.packed.grad()));
  }

  // Without gradients the same numbers come from the path that keeps no probabilities.
  at::NoGradGuard no_grad;
  const auto plain = dew::nn::short_attention(got_in.q.detach(), got_in.k.detach(), got_in.v.detach(), c.causal, scale);
  EXPECT_TRUE(at::equal(plain, got.detach()));
}

TEST(ShortAttention, PatchSequencesMatchTheReference) {
  check_case({3, 4, 4, 49, 32, false});  // DiT and the ViT: a 7x7 grid, 32 dims a head
  check_case({5, 4, 4, 8, 32, false});   // a JEPA context block
  check_case({16, 4, 4, 17, 16, false}); // the JEPA predictor: context plus one target block
  check_case({2, 2, 2, 33, 20, false});  // neither length nor head size a multiple of 16 lanes
  check_case({3, 2, 2, 1, 16, false});   // a single patch
  check_case({1, 2, 2, 256, 32, false}); // the longest sequence the kernel takes
}

TEST(ShortAttention, CausalDecoderRowsMatchTheReference) {
  check_case({2, 4, 4, 128, 64, true});  // the demo decoder's training rows
  check_case({2, 3, 3, 1, 16, true});    // a single token
  check_case({2, 2, 2, 33, 48, true});   // neither length nor head size a multiple of 16 lanes
}

TEST(ShortAttention, GroupedQueryHeadsShareTheirKeysAndValues) {
  check_case({2, 6, 2, 17, 24, true});  // three query heads per key/value head; k and v gradients summed over them
  check_case({1, 4, 1, 40, 64, false});
  check_case({2, 6, 2, 17, 24, false});
}

TEST(ShortAttention, OutOfRangeInputsGoToAtensKernel) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(3);
  const auto N = dew::nn::kShortAttentionMaxTokens + 1;
  auto q = at::randn({1, 2, N, 16}, generator), k = at::randn({1, 2, N, 16}, generator), v = at::randn({1, 2, N, 16}, generator);
  EXPECT_FALSE(dew::nn::short_attention_applies(q, k, v));
  EXPECT_FALSE(dew::nn::short_attention_applies(q.to(at::kDouble), k.to(at::kDouble), v.to(at::kDouble)));
  EXPECT_FALSE(dew::nn::short_attention_applies(q.narrow(2, 0, 8), k.narrow(2, 0, 9), v.narrow(2, 0, 9)));  // a KV cache
  const double scale = 0.25;
  expect_normwise_close(dew::nn::attention_short_or_sdpa(q, k, v, true, scale), dew::nn::attention_reference(q, k, v, true, scale),
               bound(N, 16), "ATen's kernel through the dispatch");
  // In range, the dispatch takes the kernel with the default 1/sqrt(hd) scale.
  auto qs = q.narrow(2, 0, 20), ks = k.narrow(2, 0, 20), vs = v.narrow(2, 0, 20);
  expect_normwise_close(dew::nn::attention_short_or_sdpa(qs, ks, vs, false), dew::nn::attention_reference(qs, ks, vs, false, 0.25),
               bound(20, 16), "the kernel through the dispatch");
}

}  // namespace
