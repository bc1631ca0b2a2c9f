// The logit filters against hand-computed numbers, their order, and the seeded Sampler's draws.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/inference/sampling.h"

namespace {
using namespace dew::inference;

constexpr float kInf = std::numeric_limits<float>::infinity();

at::Tensor row(std::vector<float> values) { return at::tensor(values, at::kFloat).view({1, -1}); }
at::Tensor log_probs(std::vector<float> probs) { return row(probs).log(); }

// Which tokens of row 0 survived (logit > -inf).
std::vector<bool> kept(const at::Tensor& logits) {
  std::vector<bool> out;
  for (int64_t i = 0; i < logits.size(1); ++i) out.push_back(logits[0][i].item<float>() > -kInf);
  return out;
}

void expect_values(const at::Tensor& actual, std::vector<float> expected) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size()));
  auto flat = actual.reshape(-1);
  for (size_t i = 0; i < expected.size(); ++i) {
    auto a = flat[i].item<float>();
    if (std::isinf(expected[i])) {
      EXPECT_EQ(a, expected[i]) << "index " << i;
    } else {
      EXPECT_NEAR(a, expected[i], 1e-6) << "index " << i;
    }
  }
}

TEST(Sampling, RepetitionPenaltyDividesPositiveAndMultipliesNegativeSeenLogits) {
  auto logits = row({2.0f, -1.0f, 0.5f, -3.0f});
  auto seen = at::tensor({1, 1, 0, 0}).to(at::kBool).view({1, 4});
  expect_values(apply_repetition_penalty(logits, seen, 2.0), {1.0f, -2.0f, 0.5f, -3.0f});
  expect_values(apply_repetition_penalty(logits, seen, 1.0), {2.0f, -1.0f, 0.5f, -3.0f});
}

TEST(Sampling, TemperatureDividesLogitsShiftedByTheRowMax) {
  // (logits - max) / T: the softmax of logits / T, with the best token at 0 for any T.
  expect_values(apply_temperature(row({2.0f, -1.0f, 0.3f}), 0.5), {0.0f, -6.0f, -3.4f});
  expect_values(apply_temperature(row({2.0f, -1.0f, 0.3f}), 2.0), {0.0f, -1.5f, -0.85f});
}

TEST(Sampling, TopKKeepsTheKLargestAndTiesAtTheKth) {
  auto logits = row({1.0f, 3.0f, 2.0f, 3.0f, 0.0f});
  expect_values(apply_top_k(logits, 2), {-kInf, 3.0f, -kInf, 3.0f, -kInf});
  expect_values(apply_top_k(logits, 3), {-kInf, 3.0f, 2.0f, 3.0f, -kInf});
  expect_values(apply_top_k(logits, 1), {-kInf, 3.0f, -kInf, 3.0f, -kInf});  // a tie at the top stays
  expect_values(apply_top_k(logits, 0), {1.0f, 3.0f, 2.0f, 3.0f, 0.0f});
  expect_values(apply_top_k(logits, 9), {1.0f, 3.0f, 2.0f, 3.0f, 0.0f});
}

TEST(Sampling, TopPKeepsTheSmallestSetReachingP) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: ascending cumulative sums 0.05, 0.2, 0.5, 1.0; a token goes when
  // its cumulative sum is <= 1 - top_p.
  auto logits = log_probs({0.5f, 0.3f, 0.15f, 0.05f});
  EXPECT_EQ(kept(apply_top_p(logits, 0.9)), (std::vector<bool>{true, true, true, false}));   // <= 0.1
  EXPECT_EQ(kept(apply_top_p(logits, 0.75)), (std::vector<bool>{true, true, false, false}));  // <= 0.25
  EXPECT_EQ(kept(apply_top_p(logits, 0.3)), (std::vector<bool>{true, false, false, false}));  // <= 0.7
  EXPECT_EQ(kept(apply_top_p(logits, 0.01)), (std::vector<bool>{true, false, false, false}));  // top stays
  EXPECT_EQ(kept(apply_top_p(logits, 1.0)), (std::vector<bool>{true, true, true, true}));
  // Surviving logits are unchanged.
  EXPECT_NEAR(apply_top_p(logits, 0.75)[0][1].item<float>(), std::log(0.3f), 1e-6);
}

TEST(Sampling, MinPDropsTokensBelowAFractionOfTheTop) {
  auto logits = log_probs({0.5f, 0.3f, 0.15f, 0.05f});
  EXPECT_EQ(kept(apply_min_p(logits, 0.2)), (std::vector<bool>{true, true, true, false}));   // < 0.1
  EXPECT_EQ(kept(apply_min_p(logits, 0.5)), (std::vector<bool>{true, true, false, false}));  // < 0.25
  EXPECT_EQ(kept(apply_min_p(logits, 1.0)), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(kept(apply_min_p(logits, 0.0)), (std::vector<bool>{true, true, true, true}));
}

TEST(Sampling, FiltersRunInTransformersOrder) {
  // Temperature before top-p: at T = 0.5 the probabilities become p^2 / sum = 0.6849, 0.2466, 0.0616,
  // 0.0068 (ascending sums 0.0068, 0.0685, 0.315, 1), so top_p = 0.9 keeps two tokens; top-p on the raw
  // probabilities would have kept three.
  auto logits = log_probs({0.5f, 0.3f, 0.15f, 0.05f});
  Sampling s;
  s.temperature = 0.5;
  s.top_p = 0.9;
  auto out = process_logits(logits, {}, s);
  expect_values(out, {0.0f, 2 * (std::log(0.3f) - std::log(0.5f)), -kInf, -kInf});  // shifted by the max

  // Top-k before top-p: top_k = 2 leaves 4/7 and 3/7, of which top_p = 0.5 keeps one; top-p first would
  // have kept two.
  s = Sampling{};
  s.top_k = 2;
  s.top_p = 0.5;
  EXPECT_EQ(kept(process_logits(log_probs({0.4f, 0.3f, 0.2f, 0.1f}), {}, s)), (std::vector<bool>{true, false, false, false}));

  // Repetition penalty, then temperature, then min-p: penalty 2 on token 0 turns 2.0 into 1.0; at T = 0.5
  // the logits are 2, 1.4, 0 -> probabilities 0.594, 0.326, 0.080; min_p = 0.25 (threshold 0.148) drops
  // token 2.
  s = Sampling{};
  s.repetition_penalty = 2.0;
  s.temperature = 0.5;
  s.min_p = 0.25;
  auto seen = at::tensor({1, 0, 0}).to(at::kBool).view({1, 3});
  expect_values(process_logits(row({2.0f, 0.7f, 0.0f}), seen, s), {0.0f, -0.6f, -kInf});  // 2, 1.4 shifted by 2

  // Greedy: only the repetition penalty applies.
  s.temperature = 0.0;
  expect_values(process_logits(row({2.0f, 0.7f, 0.0f}), seen, s), {1.0f, 0.7f, 0.0f});
}

TEST(Sampling, GreedyPicksTheArgmax) {
  Sampling s;
  s.temperature = 0.0;
  Sampler sampler(s, 2);
  auto picked = sampler.pick(at::tensor({0.1f, 2.0f, -1.0f, 1.0f, 0.0f, 3.0f}).view({2, 3}));
  EXPECT_EQ(picked[0].item<int64_t>(), 1);
  EXPECT_EQ(picked[1].item<int64_t>(), 2);
}

TEST(Sampling, DrawsFollowTheDistributionAndNeverPickRemovedTokens) {
  const int64_t rows = 20000;
  Sampling s;
  s.seed = 3;
  Sampler sampler(s, rows);
  auto logits = at::tensor({std::log(0.7f), std::log(0.2f), std::log(0.1f), -kInf}).view({1, 4}).expand({rows, 4});
  auto picked = sampler.pick(logits.contiguous());
  auto counts = at::bincount(picked, {}, 4).to(at::kDouble) / rows;
  // Binomial standard deviations are at most 0.0033 here; 0.015 is over 4 of them.
  EXPECT_NEAR(counts[0].item<double>(), 0.7, 0.015);
  EXPECT_NEAR(counts[1].item<double>(), 0.2, 0.015);
  EXPECT_NEAR(counts[2].item<double>(), 0.1, 0.015);
  EXPECT_EQ(counts[3].item<double>(), 0.0);
}

TEST(Sampling, SameSeedSameDrawsAndRowsAreIndependentOfTheirNeighbours) {
  const int64_t rows = 6;
  auto logits = at::zeros({rows, 50});
  Sampling s;
  s.seed = 11;
  Sampler a(s, rows), b(s, rows), subset(s, rows);
  auto first = a.pick(logits), second = a.pick(logits);
  EXPECT_TRUE(first.equal(b.pick(logits)));
  EXPECT_TRUE(second.equal(b.pick(logits)));
  EXPECT_FALSE(first.equal(second));  // 6 uniform draws over 50 tokens repeating exactly: ~1e-10
  // Rows 1 and 4 alone draw what they drew in the full batch, step after step.
  auto index = at::tensor({1, 4}, at::kLong);
  EXPECT_TRUE(subset.pick(logits.index_select(0, index), index).equal(first.index_select(0, index)));
  EXPECT_TRUE(subset.pick(logits.index_select(0, index), index).equal(second.index_select(0, index)));
  s.seed = 12;
  Sampler other(s, rows);
  EXPECT_FALSE(other.pick(logits).equal(first));
  EXPECT_THROW(a.pick(at::zeros({rows - 1, 50})), dew::Error);
}

TEST(Sampling, InvalidSettingsAreRefusedByName) {
  auto refused = [](auto edit, const std::string& field) {
    Sampling s;
    edit(s);
    try {
      s.validate();
      ADD_FAILURE() << field << " was accepted";
    } catch (const dew::Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  refused([](Sampling& s) { s.temperature = -0.5; }, "temperature");
  refused([](Sampling& s) { s.top_k = -1; }, "top_k");
  refused([](Sampling& s) { s.top_p = 0.0; }, "top_p");
  refused([](Sampling& s) { s.top_p = 1.5; }, "top_p");
  refused([](Sampling& s) { s.min_p = 2.0; }, "min_p");
  refused([](Sampling& s) { s.repetition_penalty = 0.0; }, "repetition_penalty");
  refused([](Sampling& s) { s.max_new_tokens = 0; }, "max_new_tokens");
  refused([](Sampling& s) { s.n = 0; }, "n is 0");
  EXPECT_NO_THROW(Sampling{}.validate());
}

TEST(Sampling, ConfigRoundTripsThroughJson) {
  Sampling s;
  s.temperature = 0.7;
  s.top_k = 40;
  s.eos_ids = {0, 50256};
  s.seed = 1234567890123ULL;
  Sampling back;
  dew::config::from_json(dew::config::to_json(s), back, "test");
  EXPECT_EQ(back.temperature, 0.7);
  EXPECT_EQ(back.top_k, 40);
  EXPECT_EQ(back.eos_ids, (std::vector<int64_t>{0, 50256}));
  EXPECT_EQ(back.seed, 1234567890123ULL);
}

}  // namespace
