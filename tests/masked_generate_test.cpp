// The Unmask sampler (inference/masked_generate.h), driven by logits functions whose answers are known: a
// model that predicts the true tokens is reproduced at every step count by both remasking rules; the prompt
// never changes; the mask id is never drawn; continuation 0 does not change when n grows; EOS trims after
// refinement; zero new tokens; autoregressive controls refused by name.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <limits>

#include "dew/inference/masked_generate.h"
#include "test_support.h"

namespace {
using dew::inference::MaskedSampling;
using dew::inference::Sampling;
using dew::inference::SpanLogits;
using dew::test::error_of;

constexpr std::int64_t kVocab = 20, kMask = 19;

dew::nn::CausalTransformerConfig config() {
  dew::nn::CausalTransformerConfig c;
  c.vocab_size = kVocab;
  c.causal = false;
  c.mask_token_id = kMask;
  c.max_seq_len = 64;
  return c;
}

// Logits that put `margin` on the true token of each span slot (truth[k] for slot k), 0 elsewhere, and more
// still on the mask id (which the sampler must never draw). Checks that the prompt is intact.
SpanLogits oracle(std::vector<std::int32_t> truth, std::vector<std::int32_t> prompt, double margin,
                  int* evaluations = nullptr) {
  return [=](const dew::nn::DecoderInputs& in, std::int64_t span) {
    if (evaluations) ++*evaluations;
    const auto rows = in.ids.size(0), width = in.ids.size(1);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::size_t j = 0; j < prompt.size(); ++j) {
        EXPECT_EQ(in.ids[r][width - span - static_cast<std::int64_t>(prompt.size()) + static_cast<std::int64_t>(j)].item<std::int64_t>(), prompt[j]);
      }
    }
    auto logits = at::zeros({rows, span, kVocab}, at::kFloat);
    for (std::int64_t k = 0; k < span; ++k) logits.select(1, k).select(1, truth[static_cast<std::size_t>(k)]).fill_(margin);
    logits.select(2, kMask).fill_(margin + 10);
    return logits;
  };
}

TEST(MaskedGenerate, AModelThatKnowsTheTokensIsReproducedAtEveryStepCount) {
  const std::vector<std::int32_t> prompt{3, kMask, 5}, truth{7, 1, 1, 8, 2, 9, 0, 4, 6, 6};
  for (std::string remasking : {"random", "confidence"}) {
    for (std::int64_t steps : {1, 2, 3, 7, 10, 25}) {
      int evaluations = 0;
      Sampling sampling{.temperature = 1.0, .max_new_tokens = 10, .seed = 5};
      // A margin of 40 leaves every other token e^-40 of the mass: a draw can miss only with that chance.
      auto out = dew::inference::masked_generate_with(oracle(truth, prompt, 40, &evaluations), config(), {prompt}, sampling,
                                                      {.steps = steps, .remasking = remasking});
      EXPECT_EQ(out.tokens[0], truth) << remasking << " " << steps;
      EXPECT_EQ(evaluations, steps);
      EXPECT_EQ(out.refinements[0], steps);
      EXPECT_FALSE(out.stopped_at_eos[0]);
    }
  }
}

TEST(MaskedGenerate, RevealsAtTheReverseProcessPace) {
  // Confidence remasking reveals about span / (steps - 1) slots per step on the log-linear grid: after the
  // first of 5 evaluations of a 12-slot span, 3 slots are out.
  std::vector<std::int64_t> masked_counts;
  SpanLogits counting = [&](const dew::nn::DecoderInputs& in, std::int64_t span) {
    masked_counts.push_back(in.ids.narrow(1, in.ids.size(1) - span, span).eq(kMask).sum().item<std::int64_t>());
    return at::randn({in.ids.size(0), span, kVocab}, at::kFloat);
  };
  dew::inference::masked_generate_with(counting, config(), {{1, 2}}, {.max_new_tokens = 12},
                                       {.steps = 5, .remasking = "confidence"});
  EXPECT_EQ(masked_counts, (std::vector<std::int64_t>{12, 9, 6, 3, 0}));
}

// Logits that depend on the row's ids (a fixed pseudo-random function), so draws differ between rows.
SpanLogits hashing() {
  return [](const dew::nn::DecoderInputs& in, std::int64_t span) {
    auto ids = in.ids.to(at::kDouble);
    auto base = at::sin(ids.sum(1, true) * 0.37).unsqueeze(2);  // [rows, 1, 1]
    auto slots = at::arange(span, at::kDouble).view({1, span, 1});
    auto vocab = at::arange(kVocab, at::kDouble).view({1, 1, kVocab});
    return (at::sin(base * 13 + slots * 1.7 + vocab * 0.91) * 3).to(at::kFloat);
  };
}

TEST(MaskedGenerate, ContinuationZeroIsTheSameWhateverNAndTheMaskIsNeverDrawn) {
  Sampling one{.temperature = 1.0, .max_new_tokens = 8, .n = 1, .seed = 11};
  Sampling three = one;
  three.n = 3;
  for (std::string remasking : {"random", "confidence"}) {
    auto a = dew::inference::masked_generate_with(hashing(), config(), {{1, 2, 3}, {4}}, one, {.steps = 6, .remasking = remasking});
    auto b = dew::inference::masked_generate_with(hashing(), config(), {{1, 2, 3}, {4}}, three, {.steps = 6, .remasking = remasking});
    ASSERT_EQ(b.rows(), 6);
    EXPECT_EQ(b.tokens[0], a.tokens[0]);
    EXPECT_EQ(b.tokens[3], a.tokens[1]);
    EXPECT_EQ(b.prompt_of(4), 1);
    bool differ = false;
    for (std::int64_t r = 0; r < b.rows(); ++r) {
      for (auto id : b.tokens[r]) EXPECT_NE(id, kMask);
      differ = differ || b.tokens[r] != b.tokens[0];
    }
    EXPECT_TRUE(differ);  // continuations are draws, not copies
  }
}

TEST(MaskedGenerate, EosTrimsAfterRefinementAndZeroTokensKeepThePrompt) {
  const std::vector<std::int32_t> truth{7, 1, 2, 8, 2, 9};
  Sampling sampling{.temperature = 0.0, .eos_ids = {2}, .max_new_tokens = 6};
  auto out = dew::inference::masked_generate_with(oracle(truth, {4}, 5), config(), {{4}}, sampling, {.steps = 4});
  EXPECT_EQ(out.tokens[0], (std::vector<std::int32_t>{7, 1, 2}));
  EXPECT_EQ(out.lengths[0], 3);
  EXPECT_TRUE(out.stopped_at_eos[0]);
  EXPECT_EQ(out.refinements[0], 4);

  int evaluations = 0;
  sampling.max_new_tokens = 0;
  out = dew::inference::masked_generate_with(oracle(truth, {4}, 5, &evaluations), config(), {{4}}, sampling, {.steps = 4});
  EXPECT_TRUE(out.tokens[0].empty());
  EXPECT_EQ(out.refinements[0], 0);
  EXPECT_EQ(evaluations, 0);
}

TEST(MaskedGenerate, RefusesWhatUnmaskCannotFollow) {
  auto run = [&](Sampling s, MaskedSampling m, bool flags = true) {
    return error_of([&] { dew::inference::masked_generate_with(hashing(), config(), {{1}}, s, m, flags); });
  };
  EXPECT_NE(run({.top_k = 5}, {}).find("--top-k is 5"), std::string::npos);
  EXPECT_NE(run({.top_p = 0.9}, {}, false).find("sampling.top_p"), std::string::npos);
  EXPECT_NE(run({.repetition_penalty = 1.2}, {}).find("--repetition-penalty"), std::string::npos);
  EXPECT_NE(run({}, {.steps = 0}).find("--steps must be at least 1"), std::string::npos);
  // Steps are bounded: one per new token, or 4096 for shorter spans (1e9 ran, one model evaluation each).
  auto many = run({.max_new_tokens = 4}, {.steps = 1000000000});
  EXPECT_NE(many.find("--steps is 1000000000; use at most 4096 (the larger of the 4 tokens to generate (--max-new-tokens) "
                      "and 4096)"),
            std::string::npos)
      << many;
  EXPECT_NE(run({.max_new_tokens = 4}, {.steps = 4097}, false).find("masked.steps is 4097; use at most 4096"), std::string::npos);
  EXPECT_NE(run({}, {.remasking = "lowest"}).find("--remasking is 'lowest'"), std::string::npos);
  EXPECT_NE(run({.max_new_tokens = 64}, {}).find("max_seq_len"), std::string::npos);
  SpanLogits broken = [](const dew::nn::DecoderInputs& in, std::int64_t span) {
    auto logits = at::zeros({in.ids.size(0), span, kVocab}, at::kFloat);
    logits[0][0][3] = std::numeric_limits<float>::quiet_NaN();
    return logits;
  };
  auto nan = error_of([&] { dew::inference::masked_generate_with(broken, config(), {{1}}, {.max_new_tokens = 4}, {.steps = 3}); });
  EXPECT_NE(nan.find("non-finite logits at refinement 1 of 3"), std::string::npos) << nan;
  auto causal = config();
  causal.causal = true;
  causal.mask_token_id = -1;
  auto message = error_of([&] { dew::inference::masked_generate_with(hashing(), causal, {{1}}, {}, {}); });
  EXPECT_NE(message.find("mask_token_id"), std::string::npos) << message;
}

}  // namespace
