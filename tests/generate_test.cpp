// Generation on the reference fixtures' tiny decoders (tests/fixtures/lm): cached batched decoding
// against decoding without a cache, padding invisibility, EOS, n seeded continuations, logprobs, errors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <set>

#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/formats/safetensors.h"
#include "dew/inference/generate.h"
#include "dew/nn/causal_transformer.h"
#include "dew/nn/parameters.h"
#include "test_support.h"

namespace {
using dew::inference::generate;
using dew::inference::Generation;
using dew::inference::Sampling;
using dew::nn::CausalTransformer;
using dew::nn::CausalTransformerConfig;
using Prompt = std::vector<int32_t>;

// "llama", "qwen3" (qk-norm, tied embeddings), or "llama_sliding": the llama weights with a sliding
// window of 4 on layer 0, so window masks meet left padding and the cache.
CausalTransformer fixture_model(const std::string& name) {
  std::string family = name == "llama_sliding" ? "llama" : name;
  CausalTransformerConfig config;
  auto dir = dew::test::fixtures() / "lm" / family;
  dew::config::from_json(dew::config::parse_json_file(dir / "config.json"), config, (dir / "config.json").string());
  if (name == "llama_sliding") {
    config.layer_types = {"sliding_attention", "full_attention"};
    config.kinds["sliding_attention"].window = 4;
  }
  CausalTransformer model(config);
  dew::nn::load_parameters(*model, dew::formats::SafetensorsFile(dir / "weights.safetensors"));
  return model;
}

// Full-forward log-softmax over `prompt + continuation` at the positions that predict the continuation.
at::Tensor reference_logprobs(CausalTransformer& model, const Prompt& prompt, const std::vector<int32_t>& continuation) {
  std::vector<int64_t> ids(prompt.begin(), prompt.end());
  ids.insert(ids.end(), continuation.begin(), continuation.end());
  at::NoGradGuard no_grad;
  auto logits = model->forward({at::tensor(ids, at::kLong).view({1, -1})})[0];
  auto predicting = logits.narrow(0, prompt.size() - 1, continuation.size());
  auto chosen = at::tensor(std::vector<int64_t>(continuation.begin(), continuation.end()), at::kLong);
  return at::log_softmax(predicting, -1).gather(1, chosen.unsqueeze(1)).squeeze(1);
}

// Greedy decoding without a cache: the whole sequence through the model at every step.
std::vector<int32_t> greedy_without_cache(CausalTransformer& model, const Prompt& prompt, int64_t steps) {
  at::NoGradGuard no_grad;
  std::vector<int64_t> ids(prompt.begin(), prompt.end());
  std::vector<int32_t> out;
  for (int64_t t = 0; t < steps; ++t) {
    auto logits = model->forward({at::tensor(ids, at::kLong).view({1, -1})});
    auto next = logits[0][-1].argmax().item<int64_t>();
    ids.push_back(next);
    out.push_back(static_cast<int32_t>(next));
  }
  return out;
}

std::vector<float> to_vector(const at::Tensor& t) {
  auto c = t.contiguous().to(at::kFloat);
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

void expect_close(const std::vector<float>& actual, const at::Tensor& expected, double tolerance, const std::string& what) {
  auto e = to_vector(expected);
  ASSERT_EQ(actual.size(), e.size()) << what;
  for (size_t i = 0; i < e.size(); ++i) EXPECT_NEAR(actual[i], e[i], tolerance) << what << " token " << i;
}

const std::vector<Prompt> kPrompts = {{5, 17, 3}, {40, 2, 9, 33, 12, 7, 60}, {1, 22, 45, 8, 30}};

Sampling greedy(int64_t max_new_tokens) {
  Sampling s;
  s.temperature = 0.0;
  s.max_new_tokens = max_new_tokens;
  return s;
}

class Generate : public ::testing::TestWithParam<std::string> {};

TEST_P(Generate, CachedBatchedGreedyEqualsUncachedAndEachPromptAlone) {
  auto model = fixture_model(GetParam());
  const int64_t steps = 12;
  auto batched = generate(model, kPrompts, greedy(steps));
  ASSERT_EQ(batched.rows(), 3);
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    auto expected = greedy_without_cache(model, kPrompts[i], steps);
    EXPECT_EQ(batched.tokens[i], expected) << "prompt " << i;
    EXPECT_EQ(batched.lengths[i], steps);
    EXPECT_FALSE(batched.stopped_at_eos[i]);
    auto alone = generate(model, {kPrompts[i]}, greedy(steps));
    EXPECT_EQ(alone.tokens[0], expected) << "prompt " << i << " alone";
    // Padding changes nothing but the order of float sums.
    for (int64_t t = 0; t < steps; ++t) EXPECT_NEAR(alone.logprobs[0][t], batched.logprobs[i][t], 1e-5);
    expect_close(batched.logprobs[i], reference_logprobs(model, kPrompts[i], batched.tokens[i]), 1e-5,
                 "logprobs of prompt " + std::to_string(i));
  }
  EXPECT_TRUE(model->is_training());  // the caller's mode is restored
}

TEST_P(Generate, SampledLogprobsAreTheModelsUnprocessedLogSoftmax) {
  auto model = fixture_model(GetParam());
  Sampling s;
  s.temperature = 0.7;
  s.top_k = 20;
  s.top_p = 0.9;
  s.repetition_penalty = 1.3;
  s.n = 2;
  s.seed = 4;
  s.max_new_tokens = 10;
  auto out = generate(model, kPrompts, s);
  ASSERT_EQ(out.rows(), 6);
  for (int64_t row = 0; row < out.rows(); ++row) {
    expect_close(out.logprobs[row], reference_logprobs(model, kPrompts[out.prompt_of(row)], out.tokens[row]), 1e-5,
                 "row " + std::to_string(row));
  }
}

INSTANTIATE_TEST_SUITE_P(Families, Generate, ::testing::Values("llama", "qwen3", "llama_sliding"));

TEST(Generation, EosStopsARowKeepsTheEosAndLeavesOtherRowsAsTheyWere) {
  auto model = fixture_model("llama");
  const int64_t steps = 12;
  auto free_run = generate(model, kPrompts, greedy(steps));
  // An EOS that prompt 1 produces at step 3 (the first step with a token it had not produced before),
  // and which the other rows do not produce at all.
  const auto& row1 = free_run.tokens[1];
  int64_t stop = 3;
  while (std::find(row1.begin(), row1.begin() + stop, row1[stop]) != row1.begin() + stop) ++stop;
  ASSERT_LT(stop, steps);
  int32_t eos = row1[stop];
  for (size_t other : {0u, 2u}) {
    auto& t = free_run.tokens[other];
    ASSERT_EQ(std::find(t.begin(), t.end(), eos), t.end()) << "row " << other << " produces the EOS too; pick other prompts";
  }
  auto s = greedy(steps);
  s.eos_ids = {63, eos};
  auto stopped = generate(model, kPrompts, s);
  EXPECT_TRUE(stopped.stopped_at_eos[1]);
  EXPECT_EQ(stopped.lengths[1], stop + 1);
  EXPECT_EQ(stopped.tokens[1], std::vector<int32_t>(row1.begin(), row1.begin() + stop + 1));
  EXPECT_EQ(stopped.tokens[1].back(), eos);
  EXPECT_EQ(stopped.logprobs[1].size(), static_cast<size_t>(stop + 1));
  for (size_t other : {0u, 2u}) {
    EXPECT_FALSE(stopped.stopped_at_eos[other]);
    EXPECT_EQ(stopped.lengths[other], steps);
    EXPECT_EQ(stopped.tokens[other], free_run.tokens[other]);  // rows that run on are unaffected
    for (int64_t t = 0; t < steps; ++t) EXPECT_NEAR(stopped.logprobs[other][t], free_run.logprobs[other][t], 1e-5);
  }
  // Every row stopping at its first token ends the generation after one step.
  s.eos_ids = {free_run.tokens[0][0], free_run.tokens[1][0], free_run.tokens[2][0]};
  auto first = generate(model, kPrompts, s);
  EXPECT_EQ(first.lengths, (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(first.stopped_at_eos, (std::vector<bool>{true, true, true}));
}

TEST(Generation, SeededContinuationsAreReproducibleAndDiffer) {
  auto model = fixture_model("qwen3");
  Sampling s;
  s.temperature = 1.0;
  s.n = 4;
  s.seed = 21;
  s.max_new_tokens = 10;
  auto a = generate(model, kPrompts, s), b = generate(model, kPrompts, s);
  ASSERT_EQ(a.rows(), 12);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.logprobs, b.logprobs);
  for (int64_t p = 0; p < 3; ++p) {
    std::set<std::vector<int32_t>> distinct(a.tokens.begin() + p * 4, a.tokens.begin() + p * 4 + 4);
    EXPECT_EQ(distinct.size(), 4u) << "prompt " << p;
    for (int64_t row = p * 4; row < p * 4 + 4; ++row) EXPECT_EQ(a.prompt_of(row), p);
  }
  s.seed = 22;
  EXPECT_NE(generate(model, kPrompts, s).tokens, a.tokens);
  // A row's draws do not depend on when the other rows stop: with an EOS that ends some rows early, the
  // rows that never produce it are unchanged.
  s.seed = 21;
  s.eos_ids = {a.tokens[0][2]};
  auto early = generate(model, kPrompts, s);
  int unaffected = 0;
  for (int64_t row = 0; row < a.rows(); ++row) {
    const auto& t = a.tokens[row];
    if (std::find(t.begin(), t.end(), s.eos_ids[0]) != t.end()) continue;
    EXPECT_EQ(early.tokens[row], t) << "row " << row;
    ++unaffected;
  }
  EXPECT_TRUE(early.stopped_at_eos[0]);
  EXPECT_GT(unaffected, 0);
}

TEST(Generation, TopKOfOneEqualsGreedy) {
  auto model = fixture_model("llama");
  Sampling s;
  s.temperature = 1.0;
  s.top_k = 1;
  s.seed = 9;
  s.max_new_tokens = 12;
  EXPECT_EQ(generate(model, kPrompts, s).tokens, generate(model, kPrompts, greedy(12)).tokens);
}

TEST(Generation, GreedyRepetitionPenaltyMatchesAnUncachedReference) {
  auto model = fixture_model("llama");
  auto s = greedy(10);
  s.repetition_penalty = 1.8;
  auto out = generate(model, kPrompts, s);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    std::vector<int64_t> ids(kPrompts[i].begin(), kPrompts[i].end());
    std::vector<int32_t> expected;
    for (int t = 0; t < 10; ++t) {
      auto logits = model->forward({at::tensor(ids, at::kLong).view({1, -1})})[0][-1].clone();
      auto l = logits.accessor<float, 1>();
      for (auto id : std::set<int64_t>(ids.begin(), ids.end())) l[id] = l[id] > 0 ? l[id] / 1.8f : l[id] * 1.8f;
      ids.push_back(logits.argmax().item<int64_t>());
      expected.push_back(static_cast<int32_t>(ids.back()));
    }
    EXPECT_EQ(out.tokens[i], expected) << "prompt " << i;
  }
  EXPECT_NE(out.tokens, generate(model, kPrompts, greedy(10)).tokens);  // the penalty changed something
}

TEST(Generation, BadRequestsAreRefusedClearly) {
  auto model = fixture_model("llama");  // max_seq_len 32, vocab 64
  auto message = [&](const std::vector<Prompt>& prompts, const Sampling& s) -> std::string {
    try {
      generate(model, prompts, s);
    } catch (const dew::Error& e) {
      return e.what();
    }
    return "(accepted)";
  };
  auto too_long = message({{1, 2}, Prompt(25, 3)}, greedy(8));
  EXPECT_NE(too_long.find("25 tokens"), std::string::npos) << too_long;
  EXPECT_NE(too_long.find("max_new_tokens is 8"), std::string::npos) << too_long;
  EXPECT_NE(too_long.find("max_seq_len of 32"), std::string::npos) << too_long;
  EXPECT_NE(too_long.find("prompt 1"), std::string::npos) << too_long;
  EXPECT_EQ(generate(model, {Prompt(24, 3)}, greedy(8)).lengths[0], 8);  // 24 + 8 = 32 fits
  EXPECT_NE(message({{1, 2}, {}}, greedy(4)).find("prompt 1 is empty"), std::string::npos);
  EXPECT_NE(message({}, greedy(4)).find("no prompts"), std::string::npos);
  EXPECT_NE(message({{1, 64}}, greedy(4)).find("token id 64"), std::string::npos);
  auto bad = greedy(4);
  bad.top_p = 0;
  EXPECT_NE(message({{1}}, bad).find("top_p"), std::string::npos);
  bad = greedy(4);
  bad.eos_ids = {70};
  EXPECT_NE(message({{1}}, bad).find("eos_ids"), std::string::npos);
}

}  // namespace
