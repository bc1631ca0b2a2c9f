// The fused affine LayerNorm (nn/layer_norm.h) against LayerNorm written out in float64: the output and the
// gradients of x, weight and bias, widths on and off the kernel's 16 lanes, and the fallback for inputs the
// kernel does not take.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "dew/nn/layer_norm.h"
#include "float_bounds.h"

namespace {

using dew::test::kUlp;
using dew::test::expect_normwise_close;
constexpr double kEps = 1e-6;

// Normwise bound, derived: every result is a short chain of float32 reductions -- a row's mean and variance
// over D terms, then (backward) two more D-term sums per row, or the parameter gradients' sums over the R
// rows -- each erring by at most its length in roundings relative to the sum of magnitudes. 8 (D + R) u
// covers the chain with room; a wrong index or a missing term errs by O(1).
double bound(std::int64_t D, std::int64_t R) { return 8.0 * static_cast<double>(D + R) * kUlp; }

void check(at::IntArrayRef shape, std::uint64_t seed) {
  SCOPED_TRACE(testing::Message() << "shape " << shape);
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto D = shape.back();
  auto x = (at::randn(shape, generator) * 3 + 1).requires_grad_(true);
  auto w = (at::randn({D}, generator) * 0.5 + 1).requires_grad_(true), b = at::randn({D}, generator).requires_grad_(true);
  auto xd = x.detach().to(at::kDouble).requires_grad_(true), wd = w.detach().to(at::kDouble).requires_grad_(true),
       bd = b.detach().to(at::kDouble).requires_grad_(true);
  const auto got = dew::nn::affine_layer_norm(x, w, b, kEps);
  const auto mean = xd.mean(-1, true), var = (xd - mean).pow(2).mean(-1, true);
  const auto want = (xd - mean) / (var + kEps).sqrt() * wd + bd;
  const std::int64_t R = x.numel() / D;
  expect_normwise_close(got, want, bound(D, R), "output");
  auto g = at::randn(shape, generator);
  (got * g).sum().backward();
  (want * g.to(at::kDouble)).sum().backward();
  expect_normwise_close(x.grad(), xd.grad(), bound(D, R), "gradient of x");
  expect_normwise_close(w.grad(), wd.grad(), bound(D, R), "gradient of the weight");
  expect_normwise_close(b.grad(), bd.grad(), bound(D, R), "gradient of the bias");
}

TEST(AffineLayerNorm, MatchesTheReferenceForwardAndBackward) {
  check({4, 49, 128}, 1);  // the ViT's tokens
  check({3, 17, 64}, 2);   // the predictor's width
  check({5, 7, 20}, 3);    // a width off the 16-lane grid
  check({1, 3}, 4);        // one short row: the parameter gradients are that row's
}

TEST(AffineLayerNorm, OtherInputsGoToAtensLayerNorm) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(9);
  auto x = at::randn({6, 40}, generator).narrow(1, 4, 32);  // rows of a wider tensor: not contiguous
  auto w = at::randn({32}, generator), b = at::randn({32}, generator);
  EXPECT_TRUE(at::allclose(dew::nn::affine_layer_norm(x, w, b, kEps), at::layer_norm(x, {32}, w, b, kEps)));
  auto xd = x.to(at::kDouble), wd = w.to(at::kDouble), bd = b.to(at::kDouble);
  EXPECT_TRUE(at::allclose(dew::nn::affine_layer_norm(xd, wd, bd, kEps), at::layer_norm(xd, {32}, wd, bd, kEps)));
}

}  // namespace
