// adaLN's fused norm-and-modulate (nn/diffusion/modulated_norm.h) against the same composite computed in
// float64: outputs and the gradients of x, shift and scale.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "dew/nn/diffusion/modulated_norm.h"

namespace {

using dew::nn::diffusion::modulated_layer_norm;

at::Tensor reference(const at::Tensor& x, const at::Tensor& shift, const at::Tensor& scale, double eps) {
  const auto mean = x.mean(-1, true);
  const auto var = (x - mean).pow(2).mean(-1, true);
  return (x - mean) * (var + eps).rsqrt() * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1);
}

TEST(ModulatedLayerNorm, MatchesTheCompositeInFloat64WithGradients) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  // Rows with an offset and a spread (LayerNorm's cancellation case), 2 images x 5 tokens x 48 features;
  // shift and scale as non-contiguous views, as DiT's chunked modulation hands them over.
  const auto x = (at::randn({2, 5, 48}, gen) * 3 + 10).requires_grad_(true);
  const auto m = at::randn({2, 2 * 48}, gen).requires_grad_(true);
  const auto parts = m.chunk(2, 1);
  const auto w = at::randn({2, 5, 48}, gen);

  const auto y = modulated_layer_norm(x, parts[0], parts[1], 1e-6);
  (y * w).sum().backward();
  const auto dx = x.grad().clone(), dm = m.grad().clone();

  const auto x64 = x.detach().to(at::kDouble).requires_grad_(true), m64 = m.detach().to(at::kDouble).requires_grad_(true);
  const auto p64 = m64.chunk(2, 1);
  const auto y64 = reference(x64, p64[0], p64[1], 1e-6);
  (y64 * w.to(at::kDouble)).sum().backward();

  // float32 arithmetic on rows of 48 with |x_hat| <= ~3 and |1 + scale| <= ~4: each output is a few
  // roundings of values of size ~10, so |error| <= ~1e-5 absolute (64 u of the largest magnitude); the
  // gradient sums 48 (dx: the row means) or 5 (dshift, dscale) such terms of size ~10: 1e-4.
  EXPECT_LT((y.to(at::kDouble) - y64).abs().max().item<double>(), 1e-5);
  EXPECT_LT((dx.to(at::kDouble) - x64.grad()).abs().max().item<double>(), 1e-4);
  EXPECT_LT((dm.to(at::kDouble) - m64.grad()).abs().max().item<double>(), 1e-4);
  EXPECT_GT(dm.abs().max().item<double>(), 0.1);  // the gradients are not trivially zero
}

TEST(ModulatedLayerNorm, OtherDtypesCompose) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(8);
  const auto x = at::randn({2, 3, 8}, gen, at::kDouble), shift = at::randn({2, 8}, gen, at::kDouble), scale = at::randn({2, 8}, gen, at::kDouble);
  // The composite path computes the norm's statistics in float32 (plain_layer_norm): float32 agreement.
  EXPECT_TRUE(at::allclose(modulated_layer_norm(x, shift, scale, 1e-6), reference(x, shift, scale, 1e-6), 1e-5, 1e-5));
}

}  // namespace
