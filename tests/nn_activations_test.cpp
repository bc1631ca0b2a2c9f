// The fused activations (nn/activations.h) against the exact functions in float64: values and gradients
// over the whole float range that matters, the fallback path, and autograd wiring.
#include <gtest/gtest.h>

#include <cmath>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "dew/nn/activations.h"
#include "float_bounds.h"

namespace {

using dew::test::kUlp;

// Inputs: a fine grid over [-30, 30] (both tails, where the sigmoid saturates), small magnitudes around 0,
// normals, and the clamp's edges.
at::Tensor inputs() {
  auto grid = at::linspace(-30, 30, 60001, at::kFloat);
  auto tiny = at::linspace(-1e-3, 1e-3, 2001, at::kFloat);
  auto normal = at::randn({20000}, at::make_generator<at::CPUGeneratorImpl>(1)) * 3;
  auto edges = at::tensor({0.0f, -0.0f, 1e-30f, -1e-30f, 87.0f, -87.0f, 88.5f, -88.5f, 200.0f, -200.0f, 1e6f, -1e6f});
  return at::cat({grid, tiny, normal, edges});
}

struct Exact {
  at::Tensor y, dydx, z, dzdx;  // float64; z = the sigmoid's argument
};

// exp's input is clamped to [-87, 88], so the sigmoid never falls below 1 / (1 + e^88) (~6e-39, where the
// exact value underflows to 0 in float32): an absolute error of that much per unit of what multiplies it.
constexpr double kSigmoidFloor = 6.1e-39;

Exact exact_gelu(const at::Tensor& x32) {
  const auto x = x32.to(at::kDouble);
  const double c = std::sqrt(2.0 / M_PI), a = 0.044715;
  const auto z = 2 * c * (x + a * x.pow(3));
  const auto s = at::sigmoid(z);
  const auto dzdx = 2 * c * (1 + 3 * a * x * x);
  return {x * s, s + x * s * (1 - s) * dzdx, z, dzdx};
}

Exact exact_silu(const at::Tensor& x32) {
  const auto x = x32.to(at::kDouble);
  const auto s = at::sigmoid(x);
  return {x * s, s * (1 + x * (1 - s)), x, at::ones_like(x)};
}

// Error bound (a derivation, not a fit): y = x * s(z). z carries ~4 roundings (relative), which move s by
// s (1 - s) |z| 4u, i.e. s's relative error by (1 - s) |z| 4u <= |z| 4u; exp adds ~2u (its polynomial is exact
// to 5e-9 < u/10, then 1 + e and the division add 2u); the product x * s 1u. So |y - y*| <= (8 + 4|z|) u |y*|,
// with |z| capped at 88 by the clamp (beyond it exp's input is clamped and s is 0 or 1 to float precision).
void expect_values(const at::Tensor& got, const Exact& want, const at::Tensor& x) {
  const auto bound = (8 + 4 * want.z.abs().clamp_max(88)) * kUlp * want.y.abs() + 2 * kSigmoidFloor * x.to(at::kDouble).abs() + 1e-300;
  const auto err = (got.to(at::kDouble) - want.y).abs();
  const auto ratio = err / bound;
  const auto i = ratio.argmax().item<std::int64_t>();
  EXPECT_LE(ratio[i].item<double>(), 1.0) << "largest error / bound, at z = " << want.z[i].item<double>() << ": got "
                                          << got[i].item<double>() << ", want " << want.y[i].item<double>();
}

// The gradient: the same reasoning term by term, with its magnitude as the scale (the terms can cancel).
void expect_gradients(const at::Tensor& got, const Exact& want, const at::Tensor& x32) {
  const auto x = x32.to(at::kDouble);
  const auto s = at::sigmoid(want.z);
  const auto scale = s + (x * s * (1 - s)).abs() * (1 + want.z.abs()) * want.dzdx.abs();
  const auto bound = (16 + 8 * want.z.abs().clamp_max(88)) * kUlp * scale + 2 * kSigmoidFloor * (1 + x.abs() * (1 + want.dzdx.abs())) + 1e-300;
  const auto ratio = (got.to(at::kDouble) - want.dydx).abs() / bound;
  const auto i = ratio.argmax().item<std::int64_t>();
  EXPECT_LE(ratio[i].item<double>(), 1.0) << "largest gradient error / bound, at x = " << x[i].item<double>() << ": got "
                                          << got[i].item<double>() << ", want " << want.dydx[i].item<double>();
}

TEST(FusedActivations, GeluTanhMatchesTheExactFunctionAndItsDerivative) {
  const auto x = inputs();
  const auto want = exact_gelu(x);
  at::NoGradGuard none;
  expect_values(dew::nn::gelu_tanh(x), want, x);
  // LibTorch's float kernel computes 0.5 x (1 + tanh(u)), which cancels to 0 in the negative tail (z < -17)
  // where x sigmoid(z) is still ~1e-10 (x = -6): there the fused kernel is the more accurate of the two.
  EXPECT_EQ(at::gelu(at::tensor({-6.0f}), "tanh").item<float>(), 0.0f);
  EXPECT_LT(dew::nn::gelu_tanh(at::tensor({-6.0f})).item<float>(), -5e-11f);

  at::GradMode::set_enabled(true);
  auto leaf = x.clone().requires_grad_(true);
  auto y = dew::nn::gelu_tanh(leaf);
  ASSERT_TRUE(y.requires_grad());
  y.backward(at::ones_like(y));
  expect_gradients(leaf.grad(), want, x);
}

TEST(FusedActivations, SiluMatchesTheExactFunctionAndItsDerivative) {
  const auto x = inputs();
  const auto want = exact_silu(x);
  expect_values(dew::nn::silu(x), want, x);
  auto leaf = x.clone().requires_grad_(true);
  // A non-contiguous input and a non-trivial incoming gradient: the kernel reads contiguous copies.
  auto w = at::rand_like(x) + 0.5;
  auto y = dew::nn::silu(leaf.view({-1, 1}).expand({-1, 2}).select(1, 1));
  (y * w).sum().backward();
  expect_gradients(leaf.grad() / w, want, x);
}

// Gated units y = act(g) u: the activation's bounds above, plus one rounding for the product with u (and,
// in the backward, one more for each further product: dy u act'(g) and dy g s).
void expect_gated(at::Tensor (*fused)(const at::Tensor&, const at::Tensor&), Exact (*exact)(const at::Tensor&)) {
  const auto g = inputs();
  const auto u = at::randn_like(g) * 2;
  const auto dy = at::randn_like(g);
  const auto want = exact(g);
  const auto u64 = u.to(at::kDouble), dy64 = dy.to(at::kDouble), g64 = g.to(at::kDouble);
  const auto z = want.z.abs().clamp_max(88);
  const auto s = at::sigmoid(want.z);

  auto y = fused(g, u);
  const auto y_bound = ((9 + 4 * z) * kUlp * want.y.abs() + 2 * kSigmoidFloor * g64.abs()) * u64.abs() + 1e-300;
  EXPECT_LE(((y.to(at::kDouble) - want.y * u64).abs() / y_bound).max().item<double>(), 1.0);

  auto gl = g.clone().requires_grad_(true), ul = u.clone().requires_grad_(true);
  fused(gl, ul).backward(dy);
  // du = dy act(g): act's value bound and one more rounding.
  const auto du_bound = ((10 + 4 * z) * kUlp * want.y.abs() + 2 * kSigmoidFloor * g64.abs()) * dy64.abs() + 1e-300;
  EXPECT_LE(((ul.grad().to(at::kDouble) - dy64 * want.y).abs() / du_bound).max().item<double>(), 1.0);
  // dg = dy u act'(g): act's gradient bound (as expect_gradients) and two more roundings.
  const auto scale = s + (g64 * s * (1 - s)).abs() * (1 + want.z.abs()) * want.dzdx.abs();
  const auto dg_bound = ((18 + 8 * z) * kUlp * scale + 2 * kSigmoidFloor * (1 + g64.abs() * (1 + want.dzdx.abs()))) * (dy64 * u64).abs() + 1e-300;
  EXPECT_LE(((gl.grad().to(at::kDouble) - dy64 * u64 * want.dydx).abs() / dg_bound).max().item<double>(), 1.0);
}

TEST(FusedActivations, SwiGluAndGeGluMatchTheExactUnitsAndTheirGradients) {
  expect_gated(dew::nn::swiglu, exact_silu);
  expect_gated(dew::nn::geglu, exact_gelu);
  // Only one input requiring a gradient: the other's is not computed, and the wiring still holds.
  const auto g = at::randn({3, 5}, at::make_generator<at::CPUGeneratorImpl>(3));
  auto u = at::randn({3, 5}, at::make_generator<at::CPUGeneratorImpl>(4)).requires_grad_(true);
  dew::nn::swiglu(g, u).sum().backward();
  EXPECT_TRUE(at::allclose(u.grad(), dew::nn::silu(g), 4 * kUlp, 0));  // the same kernels, compiled apart
}

TEST(FusedActivations, OtherDtypesUseLibTorchsKernels) {
  const auto x = at::randn({64}, at::make_generator<at::CPUGeneratorImpl>(2)).to(at::kDouble);
  EXPECT_TRUE(at::equal(dew::nn::gelu_tanh(x), at::gelu(x, "tanh")));
  EXPECT_TRUE(at::equal(dew::nn::silu(x), at::silu(x)));
  const auto b = x.to(at::kBFloat16);
  EXPECT_TRUE(at::equal(dew::nn::silu(b), at::silu(b)));
  EXPECT_TRUE(at::equal(dew::nn::swiglu(b, b), at::silu(b) * b));
}

}  // namespace
