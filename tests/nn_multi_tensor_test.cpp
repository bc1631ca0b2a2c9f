// One parallel pass over a list of tensors (nn/multi_tensor.h): every element visited once whatever the
// sizes, lerp as ATen's, and the conditions under which the pass applies.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "dew/nn/multi_tensor.h"

namespace {

std::vector<at::Tensor> assorted(std::uint64_t seed) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<at::Tensor> out;
  // Below, at and above the 32 K-element task size, and tensors that share a task.
  for (std::int64_t n : {1, 7, 100, 32768, 32769, 70000, 3, 40000}) out.push_back(at::randn({n}, generator));
  return out;
}

TEST(MultiTensor, EveryElementIsVisitedOnce) {
  std::vector<at::Tensor> tensors;
  for (const auto& t : assorted(1)) tensors.push_back(at::zeros_like(t));
  dew::nn::for_each_chunk(tensors, [&](std::size_t i, std::int64_t begin, std::int64_t end) {
    tensors[i].narrow(0, begin, end - begin).add_(1);  // ranges of one tensor never overlap across tasks
  });
  for (const auto& t : tensors) EXPECT_TRUE(at::equal(t, at::ones_like(t))) << t.numel();
}

TEST(MultiTensor, LerpIsAtensLerp) {
  for (double weight : {0.001, 0.1, 0.7, 1.0}) {
    auto targets = assorted(2), sources = assorted(3);
    std::vector<at::Tensor> want;
    for (std::size_t i = 0; i < targets.size(); ++i) want.push_back(at::lerp(targets[i], sources[i], weight));
    dew::nn::lerp_each(targets, sources, weight);
    for (std::size_t i = 0; i < targets.size(); ++i) {
      // The same formula in float32; ATen's vector kernel may fuse its multiply-add where this one rounds
      // twice: at most one rounding (2^-24 relative) of the larger term apart.
      const auto bound = (targets[i].abs() + sources[i].abs()).to(at::kDouble) * 1.2e-7;
      EXPECT_TRUE(((targets[i].to(at::kDouble) - want[i].to(at::kDouble)).abs() <= bound).all().item<bool>()) << weight << " " << i;
    }
    if (weight == 1.0) {
      for (std::size_t i = 0; i < targets.size(); ++i) EXPECT_TRUE(at::equal(targets[i], sources[i]));  // exact at the far end
    }
  }
}

TEST(MultiTensor, AppliesOnlyToPairedContiguousFloatTensorsOnTheCpu) {
  auto a = assorted(4), b = assorted(5);
  EXPECT_TRUE(dew::nn::multi_tensor_applies({&a, &b}));
  auto shorter = std::vector<at::Tensor>(b.begin(), b.end() - 1);
  EXPECT_FALSE(dew::nn::multi_tensor_applies({&a, &shorter}));
  auto doubles = b;
  doubles[0] = doubles[0].to(at::kDouble);
  EXPECT_FALSE(dew::nn::multi_tensor_applies({&a, &doubles}));
  auto strided = a;
  strided[2] = at::randn({200}).slice(0, 0, 200, 2);
  EXPECT_FALSE(dew::nn::multi_tensor_applies({&strided, &b}));
  // Where it does not apply, lerp_each falls back to ATen and still computes the lerp.
  auto target = std::vector<at::Tensor>{at::zeros({4}, at::kDouble)}, source = std::vector<at::Tensor>{at::ones({4}, at::kDouble)};
  dew::nn::lerp_each(target, source, 0.25);
  EXPECT_TRUE(at::allclose(target[0], at::full({4}, 0.25, at::kDouble)));
}

}  // namespace
