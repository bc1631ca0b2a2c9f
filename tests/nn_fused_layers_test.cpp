// The fused float32 CPU kernels for RMSNorm (nn/rms_norm.h) and rotary embeddings (nn/rotary.h) against
// their definitions in float64: values, input and weight gradients, shapes that leave partial lane groups
// and row blocks, layouts, and the paths that fall back to the ATen composition.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "dew/nn/rms_norm.h"
#include "dew/nn/rotary.h"
#include "float_bounds.h"

namespace {

using dew::test::kUlp;

at::Generator seeded(std::uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

double worst(const at::Tensor& err, const at::Tensor& bound) { return (err / (bound + 1e-300)).max().item<double>(); }

// Error bounds (derivations, not fits). A sum of D float32 products carries at most ~D u relative error
// (the kernel's 16 lanes make it D/16 + 16, ATen's order differs, so the bound takes the worst case D).
// rsqrt of it halves that and adds ~2u; the products after it add a rounding each. Hence values within
// (D + 8) u of |y|. The input gradient rstd (g s - n mean(g s n)) cancels, so its bound is on the sum of
// magnitudes, rstd (|g s| + |n| mean|g s n|), with the same (D + 16) u; the weight gradient is a sum over
// rows of g n, (rows + D + 8) u of sum |g n|.
void check_rms_norm(std::int64_t rows, std::int64_t d, double offset, std::uint64_t seed) {
  SCOPED_TRACE(testing::Message() << "rows " << rows << ", d " << d << ", offset " << offset);
  const auto x = at::randn({rows, d}, seeded(seed)) * 3;
  const auto w = at::randn({d}, seeded(seed + 1)) * 0.5 + 1;
  const auto dy = at::randn({rows, d}, seeded(seed + 2));
  const double eps = 1e-6;

  auto x64 = x.to(at::kDouble).requires_grad_(true), w64 = w.to(at::kDouble).requires_grad_(true);
  const auto rstd64 = at::rsqrt(x64.pow(2).mean(-1, true) + eps);
  const auto n64 = x64 * rstd64;
  const auto scale64 = w64 + offset;
  const auto y64 = n64 * scale64;
  y64.backward(dy.to(at::kDouble));

  auto xf = x.clone().requires_grad_(true), wf = w.clone().requires_grad_(true);
  const auto y = dew::nn::rms_norm(xf, wf, eps, offset);
  ASSERT_EQ(y.scalar_type(), at::kFloat);
  y.backward(dy);

  const double D = static_cast<double>(d), R = static_cast<double>(rows);
  at::NoGradGuard none;
  EXPECT_LE(worst((y.to(at::kDouble) - y64).abs(), (D + 8) * kUlp * y64.abs()), 1.0);
  const auto gs = dy.to(at::kDouble) * scale64;
  const auto dx_scale = rstd64 * (gs.abs() + n64.abs() * (gs * n64).abs().mean(-1, true));
  EXPECT_LE(worst((xf.grad().to(at::kDouble) - x64.grad()).abs(), (D + 16) * kUlp * dx_scale), 1.0);
  const auto dw_scale = (dy.to(at::kDouble) * n64).abs().sum(0);
  EXPECT_LE(worst((wf.grad().to(at::kDouble) - w64.grad()).abs(), (R + D + 8) * kUlp * dw_scale), 1.0);
}

TEST(FusedRmsNorm, MatchesTheDefinitionAndItsGradients) {
  check_rms_norm(200, 64, 0.0, 1);  // rows: three full blocks of 64 and a partial one
  check_rms_norm(67, 40, 0.0, 2);   // d: two lane groups of 16 and a tail of 8
  check_rms_norm(5, 576, 1.0, 3);   // SmolLM2's width, Gemma's (1 + weight)
  check_rms_norm(1, 7, 0.0, 4);     // shorter than one lane group
}

TEST(FusedRmsNorm, AgreesWithTheCompositionOnLeadingDimensionsAndWithoutGradients) {
  const auto x = at::randn({2, 3, 5, 32}, seeded(5));
  const auto w = at::rand({32}, seeded(6)) + 0.5;
  const auto want = dew::nn::rms_norm_reference(x, w, 1e-5);
  const auto got = dew::nn::rms_norm(x, w, 1e-5);
  ASSERT_EQ(got.sizes(), x.sizes());
  EXPECT_TRUE(at::allclose(got, want, 40 * kUlp, 0));  // (D + 8) u, as above
  EXPECT_FALSE(got.requires_grad());
  // A frozen weight (LoRA): only the input's gradient flows.
  auto leaf = x.clone().requires_grad_(true);
  dew::nn::rms_norm(leaf, w, 1e-5).sum().backward();
  ASSERT_TRUE(leaf.grad().defined());
  EXPECT_FALSE(w.grad().defined());
  // A non-contiguous input is read through a contiguous copy.
  const auto t = x.transpose(1, 2);
  EXPECT_TRUE(at::allclose(dew::nn::rms_norm(t, w, 1e-5), dew::nn::rms_norm_reference(t, w, 1e-5), 40 * kUlp, 0));
}

TEST(FusedRmsNorm, OtherDtypesTakeTheComposition) {
  const auto x = at::randn({4, 16}, seeded(7)).to(at::kBFloat16);
  const auto w = at::rand({16}, seeded(8)) + 0.5;
  EXPECT_TRUE(at::equal(dew::nn::rms_norm(x, w, 1e-6), dew::nn::rms_norm_reference(x, w, 1e-6)));
  const auto xd = x.to(at::kDouble);
  EXPECT_TRUE(at::equal(dew::nn::rms_norm(xd, w, 1e-6, 1.0), dew::nn::rms_norm_reference(xd, w, 1e-6, 1.0)));
}

// Rotary: every output element is a c - b s (or a c + b s) of float32 inputs, two products and a sum,
// within 2u (one rounding less where the compiler fuses a multiply-add) of |a c| + |b s|; the gradient is
// the transposed rotation of the incoming gradient, with the same bound.
at::Tensor rotate64(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const auto half = x.size(-1) / 2;
  const auto rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

at::Tensor magnitude64(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const auto half = x.size(-1) / 2;
  const auto rotated = at::cat({x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1).abs();
  return x.abs() * cos.abs() + rotated * sin.abs();
}

TEST(FusedRotary, MatchesTheRotationAndItsTranspose) {
  const std::int64_t B = 3, S = 11, H = 5, D = 48;
  const auto positions = at::randint(0, 2048, {B, S}, seeded(9));
  const auto angles = dew::nn::rotary_angles(positions, D, 10000.0, at::kFloat);
  // q as the attention makes it: [B, S, H, D] memory seen as [B, H, S, D].
  const auto mem = at::randn({B, S, H, D}, seeded(10));
  auto x = mem.clone().requires_grad_(true);
  const auto y = dew::nn::apply_rotary(x.transpose(1, 2), angles);
  ASSERT_EQ(y.sizes(), (at::IntArrayRef{B, H, S, D}));
  EXPECT_EQ(y.transpose(1, 2).is_contiguous(), true) << "the output keeps the [B, S, H, D] layout";
  const auto dy = at::randn({B, H, S, D}, seeded(11));
  y.backward(dy);

  at::NoGradGuard none;
  const auto c = angles.cos.to(at::kDouble), s = angles.sin.to(at::kDouble);
  const auto x64 = mem.transpose(1, 2).to(at::kDouble);
  EXPECT_LE(worst((y.to(at::kDouble) - rotate64(x64, c, s)).abs(), 2 * kUlp * magnitude64(x64, c, s)), 1.0);
  // The transpose of "x c + rot(x) s" is "g c - rot(g s)", rot(v) = [-v2, v1]: [g1 c1 + g2 s2, g2 c2 - g1 s1].
  const auto g = dy.to(at::kDouble);
  const auto half = D / 2;
  const auto gs = g * s;
  const auto want = g * c + at::cat({gs.narrow(-1, half, half), -gs.narrow(-1, 0, half)}, -1);
  const auto bound = 2 * kUlp * (g.abs() * c.abs() + at::cat({gs.narrow(-1, half, half), gs.narrow(-1, 0, half)}, -1).abs());
  EXPECT_LE(worst((x.grad().transpose(1, 2).to(at::kDouble) - want).abs(), bound), 1.0);
}

TEST(FusedRotary, BroadcastAnglesAndTheCompositionAgree) {
  // Angles for one row of positions, applied to a batch of 2 (the decode path's shape); a contiguous input.
  const auto positions = at::arange(7, at::kLong).unsqueeze(0);
  const auto angles = dew::nn::rotary_angles(positions, 16, 500000.0, at::kFloat);
  const auto x = at::randn({2, 3, 7, 16}, seeded(12));
  const auto got = dew::nn::apply_rotary(x, angles);
  const auto want = dew::nn::apply_rotary_reference(x, angles);
  // Each within 2u (|a| + |b|) of the exact value, |x| < 6 here: apart by at most 4u x 12 < 3e-6.
  EXPECT_TRUE(at::allclose(got, want, 0, 3e-6));
  // bfloat16 takes the composition.
  const auto bangles = dew::nn::rotary_angles(positions, 16, 500000.0, at::kBFloat16);
  const auto xb = x.to(at::kBFloat16);
  EXPECT_TRUE(at::equal(dew::nn::apply_rotary(xb, bangles), dew::nn::apply_rotary_reference(xb, bangles)));
}

}  // namespace
