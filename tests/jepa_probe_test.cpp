// The probes (objectives/jepa/probes.h) on features whose answer is known: separable clusters, noise, and
// kNN's weighted vote worked by hand.
#include <gtest/gtest.h>

#include <ATen/CPUGeneratorImpl.h>

#include "dew/objectives/jepa/probes.h"
#include "test_support.h"

namespace {

using namespace dew::objectives::jepa;

at::Generator gen(std::uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

// n points per class around 4 well-separated centres in 16 dimensions (distance ~8, noise std 1).
std::pair<at::Tensor, at::Tensor> clusters(std::int64_t n, std::uint64_t seed) {
  auto g = gen(seed);
  const auto centres = at::eye(16).narrow(0, 0, 4) * 6;
  const auto labels = at::arange(4).repeat_interleave(n);
  return {centres.index({labels}) + at::randn({4 * n, 16}, g), labels};
}

TEST(JepaProbes, SeparableClustersScoreNearlyPerfectAndNoiseScoresChance) {
  const auto [train, train_labels] = clusters(50, 1);
  const auto [test, test_labels] = clusters(50, 2);
  EXPECT_GE(knn_top1(train, train_labels, test, test_labels, 4), 0.97);
  EXPECT_GE(linear_top1(train, train_labels, test, test_labels, 4), 0.97);
  // Features unrelated to the labels: chance (0.25) within sampling noise of 200 test points (std ~0.03).
  const auto noise_train = at::randn({200, 16}, gen(3)), noise_test = at::randn({200, 16}, gen(4));
  EXPECT_LT(knn_top1(noise_train, train_labels, noise_test, test_labels, 4), 0.4);
  EXPECT_LT(linear_top1(noise_train, train_labels, noise_test, test_labels, 4), 0.4);
}

TEST(JepaProbes, KnnWeighsItsNeighboursBySimilarity) {
  // One query on the x axis; neighbours: two of class 1 at 60 degrees, one of class 0 on the axis. With k = 3
  // and T = 0.1: class 0 gets e^(1/0.1) = 22026, class 1 gets 2 e^(0.5/0.1) = 297: class 0 wins although
  // outnumbered. With T = 10 the weights are nearly equal and the majority (class 1) wins.
  const double c = 0.5, s = std::sqrt(3.0) / 2;
  const auto train = at::tensor({1.0, 0.0, c, s, c, -s}, at::kDouble).view({3, 2}).to(at::kFloat);
  const auto train_labels = at::tensor({0, 1, 1}, at::kLong);
  const auto query = at::tensor({2.0f, 0.0f}).view({1, 2});
  EXPECT_EQ(knn_top1(train, train_labels, query, at::tensor({0}, at::kLong), 2, 3, 0.1), 1.0);
  EXPECT_EQ(knn_top1(train, train_labels, query, at::tensor({1}, at::kLong), 2, 3, 10.0), 1.0);
  EXPECT_NE(dew::test::error_of([&] { knn_top1(train, train_labels, query, at::tensor({0}, at::kLong), 2, 0); }).find("k must be"),
            std::string::npos);
}

}  // namespace
