// Post-training losses: per-token log-probabilities equal log_softmax of the model's logits (values and
// gradients, chunked or not); DPO (sigmoid, label-smoothed sigmoid, ipo, hinge) and GRPO (advantages, the
// clipped per-token loss with its k3 KL) equal TRL 1.16's trainer code on fixed inputs
// (tests/fixtures/post_training, from tools/reference/make_post_training_fixtures.py); DPO at beta -> 0 is
// the paper's limit; GRPO with equal rewards in a group is the KL penalty alone.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <set>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "dew/nn/parameters.h"
#include "dew/objectives/dpo_loss.h"
#include "dew/objectives/grpo_loss.h"
#include "dew/objectives/shared_prompt_logprobs.h"
#include "dew/objectives/token_logprobs.h"
#include "test_support.h"

namespace {
using namespace dew::objectives;
using Json = nlohmann::json;

Json fixture(const std::string& name) {
  std::ifstream in(dew::test::fixtures() / "post_training" / name);
  return Json::parse(in);
}

// A nested JSON array of numbers -> fp64 tensor.
at::Tensor tensor_of(const Json& j) {
  std::vector<double> flat;
  std::vector<std::int64_t> shape;
  const Json* level = &j;
  while (level->is_array()) {
    shape.push_back(static_cast<std::int64_t>(level->size()));
    if (level->empty()) break;
    level = &(*level)[0];
  }
  std::function<void(const Json&)> walk = [&](const Json& x) {
    if (x.is_array()) {
      for (const auto& e : x) walk(e);
    } else {
      flat.push_back(x.get<double>());
    }
  };
  walk(j);
  return at::tensor(flat, at::kDouble).reshape(shape);
}

double max_abs(const at::Tensor& t) { return t.abs().max().item<double>(); }

// ---- token log-probabilities ------------------------------------------------------------------------
dew::nn::CausalTransformer tiny_model(double softcap = 0.0) {
  dew::nn::CausalTransformerConfig config;
  config.vocab_size = 37;
  config.emb_features = 32;
  config.num_layers = 2;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  config.max_seq_len = 32;
  config.final_logit_softcap = softcap;
  dew::nn::CausalTransformer model(config);
  model->init_parameters(7);
  return model;
}

struct Rows {
  at::Tensor ids, positions, segment_ids;
};

// Three rows of 9 ids: one plain, one packed with two documents, one with trailing padding (segment 0).
Rows rows() {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  Rows r;
  r.ids = at::randint(0, 37, {3, 9}, gen, at::kLong);
  r.positions = at::arange(9, at::kLong).repeat({3, 1});
  r.segment_ids = at::ones({3, 9}, at::kLong);
  r.segment_ids[1].narrow(0, 5, 4).fill_(2);
  r.positions[1].narrow(0, 5, 4).copy_(at::arange(4, at::kLong));
  r.segment_ids[2].narrow(0, 6, 3).fill_(0);
  return r;
}

// The direct computation: log_softmax(forward(...) / temperature) gathered at the next id.
at::Tensor direct_logprobs(dew::nn::CausalTransformer& model, const Rows& r, double temperature) {
  auto S = r.ids.size(1) - 1;
  dew::nn::DecoderInputs in{r.ids.narrow(1, 0, S), r.positions.narrow(1, 0, S), r.segment_ids.narrow(1, 0, S)};
  auto logits = model->forward(in) / temperature;
  return at::log_softmax(logits, -1).gather(-1, r.ids.narrow(1, 1, S).unsqueeze(-1)).squeeze(-1);
}

std::map<std::string, at::Tensor> gradients(dew::nn::CausalTransformer& model, const std::function<at::Tensor()>& f) {
  model->zero_grad();
  f().backward();
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, p] : dew::nn::parameter_map(*model)) {
    if (p.requires_grad()) out[name] = p.grad().clone();
  }
  return out;
}

TEST(TokenLogprobs, EqualLogSoftmaxOfTheModelsLogitsWithGradients) {
  // frozen_head: the output projection does not train (LoRA's case), so the chunked path computes the
  // hidden states' gradient rows in its forward pass instead of recomputing logits in backward. chunk 1000
  // holds all 24 tokens in one chunk: the chunked function still runs (it is what DPO's short batches take).
  for (double softcap : {0.0, 3.0}) {
    for (std::int64_t chunk : {0, 5, 1000}) {
    for (bool frozen_head : {false, true}) {
      auto model = tiny_model(softcap);
      if (frozen_head) model->output_weight().set_requires_grad(false);
      auto r = rows();
      const double temperature = chunk == 0 ? 1.0 : 0.7;
      auto got = token_logprobs(model, r.ids, r.positions, r.segment_ids, chunk, temperature);
      auto want = direct_logprobs(model, r, temperature);
      ASSERT_EQ(got.sizes(), (std::vector<std::int64_t>{3, 8}));
      // Same logits from the same matmul; only the logsumexp's reduction order differs: over V = 37 fp32
      // terms of |z| <= ~5 that is ~V * 6e-8 * 5 ~ 1e-5 at most.
      EXPECT_LT(max_abs(got - want), 1e-5) << "softcap " << softcap << " chunk " << chunk;
      EXPECT_GT(max_abs(want), 1.0);  // real numbers, not zeros

      auto weights = at::randn({3, 8}, at::make_generator<at::CPUGeneratorImpl>(3));
      auto a = gradients(model, [&] {
        return (token_logprobs(model, r.ids, r.positions, r.segment_ids, chunk, temperature) * weights).sum();
      });
      auto b = gradients(model, [&] { return (direct_logprobs(model, r, temperature) * weights).sum(); });
      for (const auto& [name, g] : a) {
        // fp32 gradients summed over 24 tokens through 2 layers: relative error ~1e-6 of the largest entry.
        double scale = std::max(1e-3, max_abs(b.at(name)));
        EXPECT_LT(max_abs(g - b.at(name)) / scale, 2e-5) << name << " softcap " << softcap << " chunk " << chunk
                                                          << " frozen head " << frozen_head;
      }
      EXPECT_EQ(a.size(), frozen_head ? b.size() : dew::nn::parameter_map(*model).size());
      EXPECT_GT(a.size(), 3u);
    }
    }
  }
}

// Preference rows as data/preference_rows.h lays them out: prompt + completion, right-padded to L, segment
// 1 on real ids, mask 1 where the target (id t + 1) is a completion id.
PairRows pair_rows(const std::vector<std::vector<std::int64_t>>& prompts, const std::vector<std::vector<std::int64_t>>& chosen,
                   const std::vector<std::vector<std::int64_t>>& rejected, std::int64_t L) {
  const auto B = static_cast<std::int64_t>(prompts.size());
  PairRows r{at::zeros({B, L}, at::kLong), at::zeros({B, L}, at::kLong), at::zeros({B, L}, at::kLong),
             at::zeros({B, L}, at::kLong), at::zeros({B, L - 1}), at::zeros({B, L - 1})};
  auto fill = [&](at::Tensor& ids, at::Tensor& seg, at::Tensor& mask, std::size_t b, const std::vector<std::int64_t>& completion) {
    std::vector<std::int64_t> row(prompts[b]);
    row.insert(row.end(), completion.begin(), completion.end());
    for (std::size_t t = 0; t < row.size(); ++t) {
      ids[b][t] = row[t];
      seg[b][t] = 1;
      if (t >= prompts[b].size()) mask[b][t - 1] = 1;
    }
  };
  for (std::size_t b = 0; b < prompts.size(); ++b) {
    fill(r.chosen, r.chosen_segments, r.chosen_mask, b, chosen[b]);
    fill(r.rejected, r.rejected_segments, r.rejected_mask, b, rejected[b]);
  }
  return r;
}

// The two-row computation dew (and TRL) does without sharing: [chosen; rejected] sequence sums.
at::Tensor two_row_logprobs(dew::nn::CausalTransformer& model, const PairRows& r) {
  const auto ids = at::cat({r.chosen, r.rejected}), segments = at::cat({r.chosen_segments, r.rejected_segments});
  return sequence_logprobs(token_logprobs(model, ids, at::Tensor(), segments, 0), at::cat({r.chosen_mask, r.rejected_mask}));
}

TEST(SharedPromptLogprobs, EqualTheTwoRowLogprobsAndTheirGradients) {
  // Prompts of different lengths, completions of different lengths on each side (one of a single id), rows
  // padded to L = 12.
  const auto rows = pair_rows({{3, 9, 4, 1, 7}, {12, 5}, {30, 2, 8, 8}}, {{6, 2, 11}, {19}, {1, 1, 4, 5}},
                              {{21, 2}, {7, 7, 7, 3}, {36}}, 12);
  for (std::int64_t chunk : {0, 4}) {
    auto model = tiny_model();
    if (chunk == 4) {
      // And a sliding-window layer (window 3), whose mask is intersected with the shared row's.
      auto config = model->config();
      config.layer_types = {"sliding_attention", "full_attention"};
      config.kinds["sliding_attention"].window = 3;
      model = dew::nn::CausalTransformer(config);
      model->init_parameters(7);
    }
    const auto shared = shared_prompt_logprobs(model, rows, chunk);
    ASSERT_TRUE(shared.has_value());
    const auto got = at::cat({shared->chosen, shared->rejected});
    const auto want = two_row_logprobs(model, rows);
    // The same per-token terms; the attention sums the same keys in another layout, and the sums over a
    // completion add at most 4 terms: a few fp32 ulp of the ~10-magnitude totals.
    EXPECT_LT(max_abs(got - want), 1e-5) << "chunk " << chunk;
    EXPECT_GT(max_abs(want), 1.0);
    if (chunk == 4) {  // the window changes the numbers: the layer is really windowed
      auto full = tiny_model();
      EXPECT_GT(max_abs(two_row_logprobs(full, rows) - want), 1e-3);
    }

    const auto weights = at::randn({6}, at::make_generator<at::CPUGeneratorImpl>(5));
    auto a = gradients(model, [&] {
      auto s = *shared_prompt_logprobs(model, rows, chunk);
      return (at::cat({s.chosen, s.rejected}) * weights).sum();
    });
    auto b = gradients(model, [&] { return (two_row_logprobs(model, rows) * weights).sum(); });
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [name, g] : a) {
      // As in EqualLogSoftmaxOfTheModelsLogitsWithGradients: fp32 sums over ~20 tokens through 2 layers.
      const double scale = std::max(1e-3, max_abs(b.at(name)));
      EXPECT_LT(max_abs(g - b.at(name)) / scale, 2e-5) << name << " chunk " << chunk;
    }
  }
}

TEST(SharedPromptLogprobs, GroupsOfCompletionsEqualOneRowEachWithGradients) {
  // Two GRPO groups of 3 rollouts (prompt + completion, right-padded to T = 10): per-token log-probabilities
  // on the completion targets, and their gradients through a masked weighted sum, as the GRPO loss reads them.
  const std::vector<std::vector<std::int64_t>> prompts{{4, 8, 15}, {16, 23}};
  const std::vector<std::vector<std::int64_t>> completions{{1, 2, 3, 4}, {5}, {6, 7}, {9, 9, 9, 9, 9, 9}, {10, 11}, {12}};
  const std::int64_t R = 6, T = 10;
  auto ids = at::zeros({R, T}, at::kLong);
  auto mask = at::zeros({R, T - 1});
  for (std::int64_t r = 0; r < R; ++r) {
    const auto& p = prompts[static_cast<std::size_t>(r / 3)];
    const auto& c = completions[static_cast<std::size_t>(r)];
    std::int64_t t = 0;
    for (auto id : p) ids[r][t++] = id;
    for (auto id : c) mask[r][t - 1] = 1, ids[r][t++] = id;
  }
  auto model = tiny_model();
  const double temperature = 0.8;
  const auto shared = shared_prompt_token_logprobs(model, ids, mask, 3, 4, temperature);
  ASSERT_TRUE(shared.has_value());
  const auto want = token_logprobs(model, ids, {}, {}, 0, temperature);
  ASSERT_EQ(shared->sizes(), want.sizes());
  const auto on = mask != 0;
  // As above: the same per-token terms, the attention over the same keys in another layout.
  EXPECT_LT(max_abs(at::where(on, *shared - want, at::zeros({}))), 1e-5);
  EXPECT_EQ(max_abs(at::where(on, at::zeros({}), *shared)), 0.0) << "entries outside the completions are 0";
  EXPECT_GT(max_abs(at::where(on, want, at::zeros({}))), 1.0);

  const auto weights = at::randn({R, T - 1}, at::make_generator<at::CPUGeneratorImpl>(9)) * mask;
  auto a = gradients(model, [&] { return (*shared_prompt_token_logprobs(model, ids, mask, 3, 4, temperature) * weights).sum(); });
  auto b = gradients(model, [&] { return (token_logprobs(model, ids, {}, {}, 0, temperature) * weights).sum(); });
  for (const auto& [name, g] : a) {
    const double scale = std::max(1e-3, max_abs(b.at(name)));
    EXPECT_LT(max_abs(g - b.at(name)) / scale, 2e-5) << name;
  }
  // A group whose rows disagree on the prompt, or a group size that does not divide the rows: declined.
  auto other = ids.clone();
  other[4][0] = 17;
  EXPECT_FALSE(shared_prompt_token_logprobs(model, other, mask, 3, 0, 1.0).has_value());
  EXPECT_FALSE(shared_prompt_token_logprobs(model, ids, mask, 4, 0, 1.0).has_value());
}

TEST(SharedPromptLogprobs, DeclinesPairsWhosePromptsDifferOrDoNotFit) {
  auto model = tiny_model();  // max_seq_len 32
  // The rows' first ids differ: not one prompt.
  auto differ = pair_rows({{3, 9}}, {{6}}, {{6}}, 4);
  differ.rejected[0][0] = 4;
  EXPECT_FALSE(shared_prompt_logprobs(model, differ, 0).has_value());
  // Each row fits in 32 ids, the shared row (2 + 20 + 20) does not.
  const std::vector<std::int64_t> long_completion(20, 5);
  EXPECT_FALSE(shared_prompt_logprobs(model, pair_rows({{3, 9}}, {long_completion}, {long_completion}, 22), 0).has_value());
}

TEST(TokenLogprobs, SequenceSumsUnderTheMaskAndIgnoresInfinityOutsideIt) {
  auto logp = at::tensor({-1.0, -2.0, -INFINITY, -0.5, -0.25, -4.0}, at::kDouble).reshape({2, 3});
  auto mask = at::tensor({1, 1, 0, 0, 1, 1}, at::kLong).reshape({2, 3});
  auto sums = sequence_logprobs(logp, mask);
  EXPECT_EQ(sums[0].item<double>(), -3.0);
  EXPECT_EQ(sums[1].item<double>(), -4.25);
  EXPECT_NE(dew::test::error_of([&] { sequence_logprobs(logp, mask.narrow(1, 0, 2)); }).find("differs"),
            std::string::npos);
}

TEST(TokenLogprobs, RefusesIdsOutsideTheVocabulary) {
  auto model = tiny_model();
  auto ids = at::tensor({1, 2, 37}, at::kLong).reshape({1, 3});
  EXPECT_NE(dew::test::error_of([&] { token_logprobs(model, ids, {}, {}, 0); }).find("token id 37"),
            std::string::npos);
}

// ---- DPO --------------------------------------------------------------------------------------------
struct DpoCase {
  at::Tensor per_token;  // leaf, [2N, T]
  DpoLogps logps;
};

DpoCase dpo_inputs(const Json& f) {
  DpoCase c;
  auto N = f["pairs"].get<std::int64_t>();
  c.per_token = tensor_of(f["per_token_logps"]).requires_grad_(true);
  auto mask = tensor_of(f["mask"]);
  auto sums = sequence_logprobs(c.per_token, mask);
  auto tokens = mask.sum(1);
  c.logps = {sums.narrow(0, 0, N), sums.narrow(0, N, N), tensor_of(f["reference_chosen"]),
             tensor_of(f["reference_rejected"]), tokens.narrow(0, 0, N), tokens.narrow(0, N, N)};
  return c;
}

TEST(DpoLoss, MatchesTrlForSigmoidLabelSmoothingIpoAndHinge) {
  auto f = fixture("dpo.json");
  auto N = f["pairs"].get<double>();
  std::set<std::string> seen;
  for (const auto& expected : f["cases"]) {
    DpoConfig config{.beta = expected["beta"].get<double>(),
                     .loss = expected["loss"].get<std::string>(),
                     .label_smoothing = expected["label_smoothing"].get<double>()};
    config.validate();
    seen.insert(config.loss + (config.label_smoothing > 0 ? "+ls" : ""));
    auto c = dpo_inputs(f);
    ASSERT_EQ(dpo_needs_token_counts(config), config.loss == "ipo");
    auto terms = dpo_loss(c.logps, config);
    auto mean = terms.losses.sum() / N;  // what the trainer makes of Loss{sum, count = pairs}
    mean.backward();
    // fp64 on both sides, a handful of operations per pair over 6 pairs: agreement to ~1e-15 relative;
    // 1e-12 leaves room for libm differences in log1p/exp.
    std::string label = config.loss + " beta " + std::to_string(config.beta);
    EXPECT_NEAR(mean.item<double>(), expected["expected_loss"].get<double>(), 1e-12 * (1 + std::abs(mean.item<double>())))
        << label;
    EXPECT_LT(max_abs(c.per_token.grad() - tensor_of(expected["expected_grad"])), 1e-12) << label;
    auto metrics = dpo_metrics(terms, c.logps);
    for (const auto& [name, value] : expected["expected_metrics"].items()) {
      // TRL casts the accuracy comparisons to float32 before averaging: its 1/3 is 0.3333333433 (fp32 ulp ~3e-8).
      double tolerance = name == "rewards/accuracies" ? 1e-7 : 1e-12;
      EXPECT_NEAR(metrics.mean(name), value.get<double>(), tolerance) << label << " " << name;
    }
  }
  EXPECT_EQ(seen, (std::set<std::string>{"sigmoid", "sigmoid+ls", "ipo", "hinge"}));
}

TEST(DpoLoss, PerPairSumsAccumulateLikeOneBatch) {
  auto f = fixture("dpo.json");
  auto c = dpo_inputs(f);
  DpoConfig config{.loss = "ipo"};
  auto whole = dpo_loss(c.logps, config).losses.sum().item<double>();
  auto half = [&](std::int64_t start, std::int64_t n) {
    DpoLogps part{c.logps.policy_chosen.narrow(0, start, n),    c.logps.policy_rejected.narrow(0, start, n),
                  c.logps.reference_chosen.narrow(0, start, n), c.logps.reference_rejected.narrow(0, start, n),
                  c.logps.chosen_tokens.narrow(0, start, n),    c.logps.rejected_tokens.narrow(0, start, n)};
    return dpo_loss(part, config).losses.sum().item<double>();
  };
  EXPECT_NEAR(half(0, 2) + half(2, 4), whole, 1e-12 * std::abs(whole));
}

// The DPO paper's gradient of the loss is -beta * sigmoid(r_rejected - r_chosen) * (grad logp_chosen -
// grad logp_rejected) (rewards r = beta * log-ratios): as beta -> 0 the loss tends to log 2 and its gradient to
// -beta / 2 * (grad logp_chosen - grad logp_rejected), so a descent step raises the chosen completion's
// log-probability and lowers the rejected one's by the same amount. Checked through a model's parameters.
TEST(DpoLoss, SigmoidAtVanishingBetaIsLogTwoAndHalfTheLogRatioGradient) {
  auto model = tiny_model();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  auto ids = at::randint(0, 37, {4, 8}, gen, at::kLong);  // rows 0-1 chosen, 2-3 rejected
  auto mask = at::zeros({4, 7}, at::kLong);
  mask.narrow(1, 3, 4).fill_(1);  // the first 4 ids are the prompt: score targets 4..7
  auto seq = [&] { return sequence_logprobs(token_logprobs(model, ids, {}, {}, 0), mask); };
  at::Tensor reference;
  {
    at::NoGradGuard no_grad;
    reference = seq() + at::randn({4}, gen);  // a reference away from the policy: non-zero log-ratios
  }
  const double beta = 1e-6;
  double loss_value = 0;
  auto dpo = gradients(model, [&] {
    auto s = seq();
    DpoLogps logps{s.narrow(0, 0, 2), s.narrow(0, 2, 2), reference.narrow(0, 0, 2), reference.narrow(0, 2, 2), {}, {}};
    auto loss = dpo_loss(logps, DpoConfig{.beta = beta}).losses.sum() / 2;
    loss_value = loss.item<double>();
    return loss / beta;
  });
  auto limit = gradients(model, [&] {
    auto s = seq();
    return -0.5 * (s.narrow(0, 0, 2) - s.narrow(0, 2, 2)).sum() / 2;
  });
  // |loss - log 2| ~ beta |d| / 2 with |d| (the log-ratio difference) ~ 10 here; 50 beta allows |d| <= 100.
  EXPECT_NEAR(loss_value, std::log(2.0), 50 * beta);
  for (const auto& [name, g] : dpo) {
    // Relative deviation from the limit ~ beta |d| / 4 ~ 3e-6, plus fp32 rounding (~1e-6) of the gradients.
    double scale = std::max(1e-3, max_abs(limit.at(name)));
    EXPECT_LT(max_abs(g - limit.at(name)) / scale, 5e-5) << name;
  }
}

TEST(DpoLoss, ConfigErrorsNameTheField) {
  auto message = [](DpoConfig c) { return dew::test::error_of([&] { c.validate(); }); };
  EXPECT_EQ(message(DpoConfig{}), "(no error)");
  EXPECT_NE(message(DpoConfig{.beta = 0}).find("dpo.beta"), std::string::npos);
  EXPECT_NE(message(DpoConfig{.loss = "kto"}).find("sigmoid, ipo and hinge"), std::string::npos);
  EXPECT_NE(message(DpoConfig{.label_smoothing = 0.5}).find("dpo.label_smoothing"), std::string::npos);
  EXPECT_NE(message(DpoConfig{.loss = "hinge", .label_smoothing = 0.1}).find("sigmoid loss only"), std::string::npos);
  auto f = fixture("dpo.json");
  auto c = dpo_inputs(f);
  c.logps.chosen_tokens = at::Tensor();
  EXPECT_NE(dew::test::error_of([&] { dpo_loss(c.logps, DpoConfig{.loss = "ipo"}); }).find("chosen_tokens"),
            std::string::npos);
}

// ---- GRPO -------------------------------------------------------------------------------------------
TEST(GrpoLoss, AdvantagesMatchTrlForEveryScaling) {
  auto f = fixture("grpo.json");
  auto rewards = tensor_of(f["rewards"]);
  auto G = f["group_size"].get<std::int64_t>();
  for (std::string scale : {"group", "batch", "none"}) {
    auto got = group_advantages(rewards, G, scale);
    // TRL's nanstd multiplies the fp64 variance by count / (count - 1) computed from int64 counts, which torch
    // divides in float32: its std is off by up to one fp32 rounding (6e-8 relative), so its advantages are
    // too, by up to 6e-8 * |A| <= 2e-7 here (|A| <= 2.3). Without the division ("none") both are exact fp64.
    double tolerance = scale == "none" ? 1e-15 : 2e-7;
    EXPECT_LT(max_abs(got - tensor_of(f["advantages"][scale])), tolerance) << scale;
  }
  EXPECT_NE(dew::test::error_of([&] { group_advantages(rewards, 5); }).find("[prompts * 5]"), std::string::npos);
}

TEST(GrpoLoss, EqualRewardsInAGroupGiveExactlyZeroAdvantage) {
  auto rewards = at::tensor({0.7, 0.7, 0.7, 1.0, 0.0, 3.0}, at::kDouble);
  auto adv = group_advantages(rewards, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(adv[i].item<double>(), 0.0);
  EXPECT_GT(max_abs(adv.narrow(0, 3, 3)), 0.5);
  // One completion per group: no spread to compare against, zero advantage (not NaN).
  EXPECT_EQ(max_abs(group_advantages(rewards, 1)), 0.0);
}

TEST(GrpoLoss, TokenLevelLossMatchesTrl) {
  auto f = fixture("grpo.json");
  auto mask = tensor_of(f["mask"]);
  auto advantages = tensor_of(f["advantages"]["group"]);
  for (const auto& expected : f["cases"]) {
    GrpoConfig config{.beta = expected["beta"].get<double>(),
                      .epsilon = expected["epsilon"].get<double>(),
                      .epsilon_high = expected["epsilon_high"].get<double>()};
    config.validate();
    auto logp = tensor_of(f["logp"]).requires_grad_(true);
    auto terms = grpo_token_terms(logp, tensor_of(f["old_logp"]), config.beta == 0 ? at::Tensor() : tensor_of(f["ref_logp"]),
                                  advantages, config);
    auto count = mask.sum().item<double>();
    auto loss = (terms.loss * mask).sum() / count;  // the trainer's sum / count
    loss.backward();
    std::string label = "beta " + std::to_string(config.beta) + " eps_high " + std::to_string(config.clip_high());
    // fp64, sums of ~47 O(1) terms: ~1e-14 relative; 1e-12 absolute on a loss of ~1e-2 and its gradient.
    EXPECT_NEAR(loss.item<double>(), expected["expected_loss"].get<double>(), 1e-12) << label;
    EXPECT_LT(max_abs(logp.grad() - tensor_of(expected["expected_grad"])), 1e-12) << label;
    auto metrics = grpo_token_metrics(terms, mask);
    EXPECT_NEAR(metrics.mean("clip_fraction"), expected["expected_metrics"]["clip_ratio/region_mean"].get<double>(), 1e-12)
        << label;
    EXPECT_GT(metrics.mean("clip_fraction"), 0.0) << label;  // the fixture does exercise clipping
    if (config.beta != 0) {
      EXPECT_NEAR(metrics.mean("kl"), expected["expected_metrics"]["kl"].get<double>(), 1e-12) << label;
    } else {
      EXPECT_FALSE(metrics.has("kl"));
    }
  }
}

TEST(GrpoLoss, ZeroAdvantageLeavesOnlyTheKlPenalty) {
  auto f = fixture("grpo.json");
  auto mask = tensor_of(f["mask"]);
  auto rewards = at::full({12}, 0.25, at::kDouble);  // every group's rewards equal
  auto advantages = group_advantages(rewards, 4);
  GrpoConfig config{.beta = 0.04};
  auto logp = tensor_of(f["logp"]).requires_grad_(true);
  auto ref = tensor_of(f["ref_logp"]);
  auto terms = grpo_token_terms(logp, tensor_of(f["old_logp"]), ref, advantages, config);
  auto kl = at::exp(ref - logp.detach()) - (ref - logp.detach()) - 1;
  EXPECT_GT((kl * mask).sum().item<double>(), 0.1);
  EXPECT_LT(max_abs((terms.loss - config.beta * kl) * mask), 1e-15);
  // And its gradient is beta * d kl / d logp = beta * (1 - exp(ref - logp)).
  (terms.loss * mask).sum().backward();
  EXPECT_LT(max_abs(logp.grad() - config.beta * (1 - at::exp(ref - logp.detach())) * mask), 1e-15);
}

TEST(GrpoLoss, ConfigErrorsNameTheField) {
  auto message = [](GrpoConfig c) { return dew::test::error_of([&] { c.validate(); }); };
  EXPECT_EQ(message(GrpoConfig{}), "(no error)");
  EXPECT_NE(message(GrpoConfig{.group_size = 1}).find("grpo.group_size"), std::string::npos);
  EXPECT_NE(message(GrpoConfig{.temperature = 0}).find("grpo.temperature"), std::string::npos);
  EXPECT_NE(message(GrpoConfig{.epsilon = 1.0}).find("grpo.epsilon"), std::string::npos);
  EXPECT_NE(message(GrpoConfig{.scale_rewards = "yes"}).find("group, batch or none"), std::string::npos);
  EXPECT_NE(message(GrpoConfig{.epochs = 0}).find("grpo.epochs"), std::string::npos);
  auto logp = at::zeros({2, 3}, at::kDouble);
  EXPECT_NE(dew::test::error_of([&] { grpo_token_terms(logp, logp, {}, at::zeros({2}), GrpoConfig{}); })
                .find("no reference"),
            std::string::npos);
}

}  // namespace
