// dew's weight-gradient kernel (nn/weight_gradient.h) against dy^T x in float64: shapes on and off its tiles
// (outputs not a multiple of 8, a 16-wide last panel, depths not a multiple of its 256-row blocks), strided
// rows, adding into a gradient, and the MKL fallback where it does not apply.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "dew/nn/weight_gradient.h"
#include "float_bounds.h"

namespace {

using dew::test::kUlp;

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq");
}

// Each entry of dW is a K-term float32 dot product; a sum of K products errs by at most ~K u times the sum of
// the terms' magnitudes (each product one rounding, each addition one), elementwise. 2 K u |dy|^T |x| bounds
// it for any order of summation, and a wrong index or a missing block errs by O(1) terms, far above it.
void expect_product(const at::Tensor& got, const at::Tensor& dy, const at::Tensor& x, const at::Tensor& base = {}) {
  auto want = at::mm(dy.to(at::kDouble).t(), x.to(at::kDouble));
  auto magnitude = at::mm(dy.to(at::kDouble).abs().t(), x.to(at::kDouble).abs());
  if (base.defined()) want += base.to(at::kDouble), magnitude += base.to(at::kDouble).abs();
  ASSERT_EQ(got.sizes(), want.sizes());
  const double K = static_cast<double>(dy.size(0)) + 1;
  auto excess = (got.to(at::kDouble) - want).abs() - magnitude * (2 * K * kUlp) - 1e-30;
  EXPECT_LE(excess.max().item<double>(), 0.0) << "largest error " << (got.to(at::kDouble) - want).abs().max().item<double>();
}

TEST(WeightGradient, MatchesTheProductOnAndOffItsTiles) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(5);
  struct Shape {
    std::int64_t K, out, in;
  };
  for (const Shape s : {Shape{3136, 128, 384}, Shape{300, 13, 48}, Shape{513, 8, 16}, Shape{1, 5, 32}, Shape{256, 40, 80},
                        Shape{2048, 257, 64}}) {
    SCOPED_TRACE(testing::Message() << "K " << s.K << " out " << s.out << " in " << s.in);
    auto dy = at::randn({s.K, s.out}, generator), x = at::randn({s.K, s.in}, generator);
    EXPECT_EQ(dew::nn::weight_gradient_applies(dy, x), cpu_has_avx512());
    expect_product(dew::nn::weight_gradient(dy, x), dy, x);
    // With the bias gradient: the same product, and dy's column sums (a K-term float32 sum each, bounded as above).
    at::Tensor db;
    expect_product(dew::nn::weight_gradient(dy, x, &db), dy, x);
    const auto want = dy.to(at::kDouble).sum(0), magnitude = dy.to(at::kDouble).abs().sum(0);
    ASSERT_EQ(db.sizes(), want.sizes());
    EXPECT_LE(((db.to(at::kDouble) - want).abs() - magnitude * (2 * static_cast<double>(s.K + 1) * kUlp)).max().item<double>(), 0.0);
  }
}

TEST(WeightGradient, ReadsRowsWhereTheyLie) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(6);
  // Columns of wider matrices: rows further apart than their length (a chunk of a packed projection).
  auto dy = at::randn({700, 50}, generator).narrow(1, 3, 37), x = at::randn({700, 100}, generator).narrow(1, 4, 64);
  ASSERT_FALSE(dy.is_contiguous());
  EXPECT_EQ(dew::nn::weight_gradient_applies(dy, x), cpu_has_avx512());
  expect_product(dew::nn::weight_gradient(dy, x), dy, x);
}

TEST(WeightGradient, AddsIntoAGradientChunkByChunk) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(7);
  auto dy = at::randn({600, 24}, generator), x = at::randn({600, 32}, generator);
  auto base = at::randn({24, 32}, generator);
  auto into = base.clone();
  for (std::int64_t start = 0; start < 600; start += 250) {  // the chunked cross entropy's pattern
    const auto n = std::min<std::int64_t>(250, 600 - start);
    dew::nn::add_weight_gradient(into, dy.narrow(0, start, n), x.narrow(0, start, n));
  }
  expect_product(into, dy, x, base);
}

TEST(WeightGradient, FallsBackToAtensProductWhereItDoesNotApply) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(8);
  auto dy = at::randn({100, 12}, generator), x = at::randn({100, 20}, generator);  // 20 inputs: not whole vectors
  EXPECT_FALSE(dew::nn::weight_gradient_applies(dy, x));
  expect_product(dew::nn::weight_gradient(dy, x), dy, x);
  auto wide = at::randn({4, 8193}, generator), x16 = at::randn({4, 16}, generator);  // an LM head's vocabulary
  EXPECT_FALSE(dew::nn::weight_gradient_applies(wide, x16));
  EXPECT_FALSE(dew::nn::weight_gradient_applies(dy.to(at::kDouble), x.to(at::kDouble)));
  auto into = at::zeros({12, 20});
  dew::nn::add_weight_gradient(into, dy, x);
  expect_product(into, dy, x);
  at::Tensor db;
  expect_product(dew::nn::weight_gradient(dy, x, &db), dy, x);
  EXPECT_TRUE(at::allclose(db, dy.sum(0)));  // the fallback's own column sum
  // No rows: zero gradients.
  auto none = dew::nn::weight_gradient(at::empty({0, 8}), at::empty({0, 16}), &db);
  EXPECT_TRUE(at::equal(none, at::zeros({8, 16})));
  EXPECT_TRUE(at::equal(db, at::zeros({8})));
}

}  // namespace
