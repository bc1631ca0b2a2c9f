// nn/cpu_matmul.h against exact float64 products: values and gradients of cpu_linear (plain, N-d input, bias,
// a weight given as a transposed view, a frozen weight), cpu_linear_plus (the residual added inside the
// product), mm_transposed, and which products take oneDNN.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "dew/nn/cpu_matmul.h"

namespace {

constexpr double kUnitRoundoff = 5.960464477539063e-08;  // 2^-24

bool onednn_switched_off() {
  const char* choice = std::getenv("DEW_CPU_MATMUL");
  return choice && std::strcmp(choice, "aten") == 0;
}

at::Tensor randn(at::IntArrayRef shape, std::uint64_t seed) {
  return at::randn(shape, at::make_generator<at::CPUGeneratorImpl>(seed));
}

// |got - a b^T| <= gamma_K (|a| |b|^T), gamma_K = K u / (1 - K u): the forward error bound of any order of
// summing K float32 products (Higham, Accuracy and Stability, 3.1), whatever the library's blocking. The
// exact product is computed in float64 (exact to ~1e-16 relative here).
void expect_product(const at::Tensor& got, const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  const auto a64 = a.to(at::kDouble), b64 = b.to(at::kDouble);
  const auto exact = at::matmul(a64, b64.t());
  const double k = static_cast<double>(a.size(-1));
  const auto bound = at::matmul(a64.abs(), b64.abs().t()) * (k * kUnitRoundoff / (1 - k * kUnitRoundoff));
  ASSERT_EQ(got.sizes(), exact.sizes()) << what;
  const auto excess = ((got.to(at::kDouble) - exact).abs() - bound).max().item<double>();
  EXPECT_LE(excess, 0.0) << what << ": beyond the float32 summation bound";
}

TEST(CpuMatmul, LargeFloat32ProductsTakeOneDnnAndSmallOnesDoNot) {
  if (onednn_switched_off()) GTEST_SKIP() << "DEW_CPU_MATMUL=aten";
  const auto w = at::zeros({256, 256});
  EXPECT_TRUE(dew::nn::uses_onednn(at::zeros({256, 256}), w));        // 16 M multiply-adds in 256 rows
  EXPECT_TRUE(dew::nn::uses_onednn(at::zeros({4, 64, 256}), w));      // N-d input: rows are all but the last dim
  EXPECT_FALSE(dew::nn::uses_onednn(at::zeros({64, 256}), w));        // 16-128 rows: MKL's
  EXPECT_FALSE(dew::nn::uses_onednn(at::zeros({256, 16}), at::zeros({256, 16})));  // 1 M: too small to pay
  const auto big = at::zeros({1536, 576});
  EXPECT_TRUE(dew::nn::uses_onednn(at::zeros({1, 576}), big));        // a decode step's matrix-vector product
  EXPECT_FALSE(dew::nn::uses_onednn(at::zeros({1, 256}), w));         // ... against a small weight: MKL's
  EXPECT_FALSE(dew::nn::uses_onednn(at::zeros({256, 256}, at::kBFloat16), w.to(at::kBFloat16)));
  EXPECT_FALSE(dew::nn::uses_onednn(at::zeros({256, 256}, at::kDouble), w.to(at::kDouble)));
}

TEST(CpuMatmul, ForwardMatchesTheExactProduct) {
  const auto x = randn({288, 320}, 1), w = randn({200, 320}, 2), b = randn({200}, 3);
  ASSERT_TRUE(onednn_switched_off() || dew::nn::uses_onednn(x, w));
  expect_product(dew::nn::cpu_linear(x, w), x, w, "x W^T");
  expect_product(dew::nn::cpu_linear(x.view({8, 36, 320}), w).view({288, 200}), x, w, "3-d x");
  const auto wt = randn({320, 200}, 4);  // W = wt^T, a transposed view read in place
  expect_product(dew::nn::cpu_linear(x, wt.t()), x, wt.t(), "transposed W");
  // The bias adds after the product: one more rounding of the sum, |y| u.
  const auto with_bias = dew::nn::cpu_linear(x, w, b);
  const auto exact = at::matmul(x.to(at::kDouble), w.to(at::kDouble).t()) + b.to(at::kDouble);
  const double k = 320;
  const auto bound = at::matmul(x.abs().to(at::kDouble), w.abs().to(at::kDouble).t()) * (k * kUnitRoundoff / (1 - k * kUnitRoundoff)) +
                     exact.abs() * kUnitRoundoff * 2;
  EXPECT_LE(((with_bias.to(at::kDouble) - exact).abs() - bound).max().item<double>(), 0.0) << "bias";
}

TEST(CpuMatmul, GradientsMatchTheExactProducts) {
  const auto x0 = randn({4, 72, 320}, 5), w0 = randn({200, 320}, 6), b0 = randn({200}, 7), dy = randn({4, 72, 200}, 8);
  auto x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
  dew::nn::cpu_linear(x, w, b).backward(dy);
  const auto dy2d = dy.view({288, 200});
  expect_product(x.grad().view({288, 320}), dy2d, w0.t(), "dx = dY W");
  expect_product(w.grad(), dy2d.t(), x0.view({288, 320}).t(), "dW = dY^T x");
  // db = the column sums of dY: 288 terms, so gamma_288 |dY| summed.
  const auto exact_db = dy2d.to(at::kDouble).sum(0);
  const auto db_bound = dy2d.abs().to(at::kDouble).sum(0) * (288 * kUnitRoundoff / (1 - 288 * kUnitRoundoff));
  EXPECT_LE(((b.grad().to(at::kDouble) - exact_db).abs() - db_bound).max().item<double>(), 0.0) << "db";
}

TEST(CpuMatmul, FrozenWeightGetsNoGradientAndTheInputStillDoes) {
  const auto x0 = randn({288, 320}, 9), w = randn({200, 320}, 10), dy = randn({288, 200}, 11);
  auto x = x0.clone().requires_grad_(true);
  dew::nn::cpu_linear(x, w).backward(dy);
  EXPECT_FALSE(w.grad().defined());
  expect_product(x.grad(), dy, w.t(), "dx with a frozen W");
}

// residual + x W^T + b against float64: the product's bound plus two more roundings of the sums (|y| 2u,
// the bias test's allowance, and |y| u for the residual).
void expect_residual_sum(const at::Tensor& got, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const at::Tensor& r,
                         const std::string& what) {
  const auto x64 = x.reshape({-1, x.size(-1)}).to(at::kDouble), w64 = w.to(at::kDouble);
  const auto exact = at::matmul(x64, w64.t()) + b.to(at::kDouble) + r.reshape({-1, w.size(0)}).to(at::kDouble);
  const double k = static_cast<double>(x.size(-1));
  const auto bound = at::matmul(x64.abs(), w64.abs().t()) * (k * kUnitRoundoff / (1 - k * kUnitRoundoff)) + exact.abs() * kUnitRoundoff * 3;
  ASSERT_EQ(got.sizes(), r.sizes()) << what;
  EXPECT_LE(((got.reshape({-1, w.size(0)}).to(at::kDouble) - exact).abs() - bound).max().item<double>(), 0.0) << what;
}

TEST(CpuMatmul, ResidualIsAddedInsideTheProductWithItsGradientPassedThrough) {
  const auto x0 = randn({4, 72, 320}, 20), w0 = randn({200, 320}, 21), b0 = randn({200}, 22), r0 = randn({4, 72, 200}, 23);
  const auto r_before = r0.clone();
  {
    at::NoGradGuard no_grad;  // the inference path (a JEPA target encoder)
    expect_residual_sum(dew::nn::cpu_linear_plus(x0, w0, b0, r0), x0, w0, b0, r0, "no grad");
  }
  EXPECT_TRUE(at::equal(r0, r_before)) << "the residual is read, not written";
  auto x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true),
       r = r0.clone().requires_grad_(true);
  const auto y = dew::nn::cpu_linear_plus(x, w, b, r);
  expect_residual_sum(y.detach(), x0, w0, b0, r0, "with autograd");
  const auto dy = randn({4, 72, 200}, 24);
  y.backward(dy);
  EXPECT_TRUE(at::equal(r.grad(), dy)) << "d residual = dY exactly";
  const auto dy2d = dy.view({288, 200});
  expect_product(x.grad().view({288, 320}), dy2d, w0.t(), "dx = dY W");
  expect_product(w.grad(), dy2d.t(), x0.view({288, 320}).t(), "dW = dY^T x");
  // Where the residual cannot ride on the product (a transposed, non-contiguous one; a product too small for
  // oneDNN) it is the plain sum, with the same gradients.
  const auto rt = randn({200, 288}, 25).t();
  expect_residual_sum(dew::nn::cpu_linear_plus(x0.view({288, 320}), w0, b0, rt), x0, w0, b0, rt.contiguous(), "strided residual");
  const auto xs = randn({8, 16}, 26), ws = randn({16, 16}, 27), bs = randn({16}, 28), rs = randn({8, 16}, 29);
  expect_residual_sum(dew::nn::cpu_linear_plus(xs, ws, bs, rs), xs, ws, bs, rs, "small product");
  auto rs_leaf = rs.clone().requires_grad_(true);
  dew::nn::cpu_linear_plus(xs, ws, bs, rs_leaf).sum().backward();
  EXPECT_TRUE(at::equal(rs_leaf.grad(), at::ones({8, 16})));
}

TEST(CpuMatmul, MmTransposedMatchesTheExactProductAndDefersToAutograd) {
  const auto a = randn({256, 300}, 12), bt = randn({300, 160}, 13);
  expect_product(dew::nn::mm_transposed(a, bt.t()), a, bt.t(), "a b^T, b a transposed view");
  expect_product(dew::nn::mm_transposed(a.view({2, 128, 300}), bt.t()).view({256, 160}), a, bt.t(), "3-d a");
  // With an operand that requires grad, autograd records the product (ATen's), and its gradient is right.
  auto leaf = a.clone().requires_grad_(true);
  const auto y = dew::nn::mm_transposed(leaf, bt.t());
  ASSERT_TRUE(y.requires_grad());
  y.sum().backward();
  expect_product(leaf.grad(), at::ones({256, 160}), bt, "grad of sum(a b^T)");
}

TEST(CpuMatmul, OneDnnAndAtenAgreeOnTheSameProduct) {
  if (onednn_switched_off()) GTEST_SKIP() << "DEW_CPU_MATMUL=aten";
  const auto a = randn({256, 576}, 14), b = randn({1536, 576}, 15);
  const auto onednn = dew::nn::onednn_mm_transposed(a, b);
  ASSERT_TRUE(onednn.defined());
  // Both within gamma_K |a||b|^T of the exact product, so within twice that of each other.
  const double k = 576;
  const auto bound = at::matmul(a.abs(), b.abs().t()) * (2 * k * kUnitRoundoff / (1 - k * kUnitRoundoff));
  EXPECT_LE(((onednn - at::mm(a, b.t())).abs() - bound).max().item<float>(), 0.0f);
  EXPECT_FALSE(at::equal(onednn, at::zeros_like(onednn)));
}

}  // namespace
