#pragma once
// What the kernel tests' tolerances are built from: float32's unit roundoff, and a normwise comparison
// against a float64 reference. Each test derives its own bound from its arithmetic and says so beside it.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

namespace dew::test {

constexpr double kUlp = 5.960464477539063e-08;  // 2^-24: float32's unit roundoff

// |got - want| <= relative |want| in the 2-norm over all elements.
inline void expect_normwise_close(const at::Tensor& got, const at::Tensor& want, double relative, const char* what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double err = (got.to(at::kDouble) - want.to(at::kDouble)).norm().item<double>();
  const double scale = want.to(at::kDouble).norm().item<double>();
  EXPECT_LE(err, relative * scale + 1e-30) << what << ": error " << err << " against |want| " << scale;
}

}  // namespace dew::test
