// GRPO's data plumbing: PromptRows (prompt indices, the validation head, shuffled epochs) and
// RepeatedBatches (a step's batches served grpo.epochs times, resumable mid-group by one int64).
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <vector>

#include "dew/data/prompt_rows.h"
#include "dew/data/repeated_batches.h"
#include "test_support.h"

namespace {
using dew::data::PromptRows;
using dew::data::RepeatedBatches;
using dew::data::Split;
using dew::test::error_of;

std::vector<std::int64_t> indices(const dew::data::Batch& batch) {
  const auto t = batch.get("prompt_index");
  EXPECT_EQ(t.scalar_type(), at::kLong);
  return {t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + t.numel()};
}

TEST(PromptRows, ValidationIsTheHeadInOrderAndTrainingShufflesTheRestPerEpoch) {
  PromptRows val(20, 2, {.split = Split::val, .seed = 5});
  EXPECT_EQ(val.records(), 2);
  EXPECT_EQ(indices(val.next_batch(2)), (std::vector<std::int64_t>{0, 1}));

  PromptRows train(20, 2, {.split = Split::train, .seed = 5});
  EXPECT_EQ(train.records(), 18);
  std::vector<std::int64_t> epoch0, epoch1;
  for (int i = 0; i < 6; ++i) {
    for (auto x : indices(train.next_batch(3))) epoch0.push_back(x);
  }
  for (int i = 0; i < 6; ++i) {
    for (auto x : indices(train.next_batch(3))) epoch1.push_back(x);
  }
  std::set<std::int64_t> seen(epoch0.begin(), epoch0.end());
  EXPECT_EQ(seen.size(), 18u);          // every training prompt once per epoch
  EXPECT_EQ(*seen.begin(), 2);          // never a validation prompt
  EXPECT_EQ(*seen.rbegin(), 19);
  EXPECT_NE(epoch0, epoch1);            // reshuffled for the next epoch
  std::vector<std::int64_t> in_order(18);
  for (int i = 0; i < 18; ++i) in_order[i] = i + 2;
  EXPECT_NE(epoch0, in_order);          // shuffled at all
  EXPECT_EQ(train.position(), 36);
}

TEST(PromptRows, ValidationCountFollowsTheFractionAndItsDefault) {
  EXPECT_EQ(dew::data::prompt_val_count(9, -1), 0);    // default: none below ten prompts
  EXPECT_EQ(dew::data::prompt_val_count(10, -1), 1);   // then a tenth
  EXPECT_EQ(dew::data::prompt_val_count(25, -1), 3);   // round(2.5) away from zero
  EXPECT_EQ(dew::data::prompt_val_count(8, 0.25), 2);
  EXPECT_EQ(dew::data::prompt_val_count(8, 0), 0);
  EXPECT_NE(error_of([] { dew::data::prompt_val_count(8, 1.0); }).find("data.val_fraction must lie in [0, 1)"), std::string::npos);
  EXPECT_NE(error_of([] { dew::data::prompt_val_count(2, 0.9); }).find("leaves none to train on"), std::string::npos);
}

// Steps of `block` micro-batches of `rows` prompts each, through RepeatedBatches(times, block).
std::vector<std::vector<std::int64_t>> take_steps(RepeatedBatches& source, int steps, std::int64_t block, std::int64_t rows) {
  std::vector<std::vector<std::int64_t>> out;
  for (int s = 0; s < steps; ++s) {
    std::vector<std::int64_t> step;
    for (std::int64_t m = 0; m < block; ++m) {
      for (auto x : indices(source.next_batch(rows))) step.push_back(x);
    }
    out.push_back(step);
  }
  return out;
}

std::unique_ptr<RepeatedBatches> repeated(std::int64_t times, std::int64_t block) {
  return std::make_unique<RepeatedBatches>(std::make_unique<PromptRows>(20, 0, dew::data::TokenLoaderOptions{.seed = 9}), times, block);
}

TEST(RepeatedBatches, ServesEachStepsBlockTimesInARow) {
  constexpr std::int64_t kTimes = 3, kBlock = 2, kRows = 3;
  auto source = repeated(kTimes, kBlock);
  auto steps = take_steps(*source, 9, kBlock, kRows);
  for (int s = 0; s < 9; ++s) {
    if (s % kTimes != 0) {
      EXPECT_EQ(steps[s], steps[s - 1]) << "step " << s;  // the same micro-batches, in the same order
    } else if (s > 0) {
      EXPECT_NE(steps[s], steps[s - 1]) << "step " << s;  // a new block from the inner source
    }
  }
  // The inner source advanced by one block per group, as a pass-through source would per step.
  auto plain = repeated(1, kBlock);
  auto distinct = take_steps(*plain, 3, kBlock, kRows);
  EXPECT_EQ(steps[0], distinct[0]);
  EXPECT_EQ(steps[3], distinct[1]);
  EXPECT_EQ(steps[6], distinct[2]);
}

TEST(RepeatedBatches, ResumesExactlyFromEveryStepIncludingMidGroup) {
  constexpr std::int64_t kTimes = 2, kBlock = 2, kRows = 3, kSteps = 12;
  auto uninterrupted = repeated(kTimes, kBlock);
  std::vector<std::int64_t> positions{uninterrupted->position()};
  std::vector<std::vector<std::int64_t>> steps;
  for (int s = 0; s < kSteps; ++s) {
    auto one = take_steps(*uninterrupted, 1, kBlock, kRows);
    steps.push_back(one[0]);
    positions.push_back(uninterrupted->position());
  }
  for (int k = 0; k < kSteps; ++k) {
    // The trainer's damaged-checkpoint bound: k steps of kBlock * kRows rows end at or before k * that.
    EXPECT_LE(positions[k], k * kBlock * kRows) << "after step " << k;
    auto resumed = repeated(kTimes, kBlock);
    resumed->set_position(positions[k]);
    auto rest = take_steps(*resumed, static_cast<int>(kSteps - k), kBlock, kRows);
    for (int s = k; s < kSteps; ++s) EXPECT_EQ(rest[s - k], steps[s]) << "resumed after step " << k << ", step " << s;
  }
  // Mid-group (an odd step with times 2) encodes the group's start and the pass: P * times + 1.
  EXPECT_EQ(positions[3] % kTimes, 1);
  EXPECT_EQ(positions[3] / kTimes, kBlock * kRows);  // the second block starts after one block of rows
  EXPECT_EQ(positions[4], 4 * kBlock * kRows);  // a group boundary meets the bound exactly
}

TEST(RepeatedBatches, OnceIsAPassThroughAndBadSettingsAreRefused) {
  auto once = repeated(1, 1);
  take_steps(*once, 4, 1, 5);
  EXPECT_EQ(once->position(), 20);
  EXPECT_NE(error_of([] { repeated(0, 1); }).find("times >= 1"), std::string::npos);
  EXPECT_NE(error_of([] { repeated(2, 0); }).find("at least 1 batch"), std::string::npos);
  EXPECT_NE(error_of([] { repeated(2, 1)->set_position(-1); }).find("cannot be negative"), std::string::npos);
}

}  // namespace
