// adaLN-Zero's fused gated residual (nn/diffusion/gated_residual.h) against x + gate * branch in float64:
// the output and the gradients of x, the gate (a strided chunk, as DiT's modulation hands it over) and the
// branch; and the addcmul path for other dtypes.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>

#include "dew/nn/diffusion/gated_residual.h"
#include "float_bounds.h"

namespace {

using dew::nn::diffusion::gated_residual;
using dew::test::kUlp;

TEST(GatedResidual, MatchesTheSumInFloat64WithGradients) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  // 3 images x 7 tokens x 40 features (not a multiple of the 16 lanes); the gate one of three chunks.
  const auto x = at::randn({3, 7, 40}, gen).requires_grad_(true), y = at::randn({3, 7, 40}, gen).requires_grad_(true);
  const auto m = at::randn({3, 3 * 40}, gen).requires_grad_(true);
  const auto gate = m.chunk(3, 1)[1];
  const auto w = at::randn({3, 7, 40}, gen);
  const auto out = gated_residual(x, gate, y);
  (out * w).sum().backward();

  const auto x64 = x.detach().to(at::kDouble).requires_grad_(true), y64 = y.detach().to(at::kDouble).requires_grad_(true);
  const auto m64 = m.detach().to(at::kDouble).requires_grad_(true);
  const auto out64 = x64 + m64.chunk(3, 1)[1].unsqueeze(1) * y64;
  (out64 * w.to(at::kDouble)).sum().backward();

  // Bounds from the arithmetic: the output is one product and one sum, each rounded once (2u of the
  // magnitudes |x| + |gate y|); dx is the incoming gradient itself and dy one product (u |w gate|); dgate
  // sums 7 products in float32 (gamma_7 ~ 7u of the sum of their magnitudes, plus u each).
  const auto mag = x64.detach().abs() + (m64.detach().chunk(3, 1)[1].unsqueeze(1) * y64.detach()).abs();
  EXPECT_LE(((out.detach().to(at::kDouble) - out64.detach()).abs() - mag * 2 * kUlp).max().item<double>(), 0.0);
  EXPECT_TRUE(at::equal(x.grad(), w)) << "x's gradient is the output's";
  EXPECT_LE(((y.grad().to(at::kDouble) - y64.grad()).abs() - y64.grad().abs() * kUlp).max().item<double>(), 0.0);
  const auto gate_terms = (w.to(at::kDouble) * y64.detach()).abs().sum(1);  // [3, 40]
  const auto dgate = m.grad().chunk(3, 1)[1].to(at::kDouble), dgate64 = m64.grad().chunk(3, 1)[1];
  EXPECT_LE(((dgate - dgate64).abs() - gate_terms * 8 * kUlp).max().item<double>(), 0.0);
  // Only the gate's chunk of the modulation gets a gradient.
  EXPECT_EQ(m.grad().chunk(3, 1)[0].abs().max().item<float>(), 0.0f);
  EXPECT_GT(dgate.abs().max().item<double>(), 0.1);
}

TEST(GatedResidual, OtherDtypesUseAddcmul) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(4);
  const auto x = at::randn({2, 3, 8}, gen, at::kDouble), gate = at::randn({2, 8}, gen, at::kDouble), y = at::randn({2, 3, 8}, gen, at::kDouble);
  EXPECT_TRUE(at::equal(gated_residual(x, gate, y), at::addcmul(x, gate.unsqueeze(1), y)));
}

}  // namespace
