// The step engine on the reference fixtures' tiny decoders (tests/fixtures/lm): greedy output equal to
// generate()'s and to cache-free decoding whatever else is in the batch, joining and leaving, cancel, stop,
// limits, per-request seeds, log-probabilities, penalties and errors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <set>

#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/formats/safetensors.h"
#include "dew/inference/engine.h"
#include "dew/inference/generate.h"
#include "dew/nn/causal_transformer.h"
#include "dew/nn/parameters.h"
#include "test_support.h"

namespace {
using dew::inference::Engine;
using dew::inference::EngineEvent;
using dew::inference::EngineOptions;
using dew::inference::EngineRequest;
using dew::inference::FinishReason;
using dew::inference::Sampling;
using dew::nn::CausalTransformer;
using dew::nn::CausalTransformerConfig;
using dew::test::error_of;
using Prompt = std::vector<int32_t>;

// "llama", "qwen3" (qk-norm, tied embeddings), or "llama_sliding" (a window of 4 on layer 0).
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

// Five prompts of five lengths (the fixtures' max_seq_len is 32, vocabulary 64).
const std::vector<Prompt> kPrompts = {
    {5, 17, 3}, {40, 2, 9, 33, 12, 7, 60}, {1, 22, 45, 8, 30}, {11, 50}, {3, 3, 61, 19, 27, 44, 6, 38, 14}};

Sampling greedy(int64_t max_new_tokens) {
  Sampling s;
  s.temperature = 0.0;
  s.max_new_tokens = max_new_tokens;
  return s;
}

EngineRequest request_of(const Prompt& prompt, const Sampling& sampling) {
  EngineRequest r;
  r.prompt = prompt;
  r.sampling = sampling;
  return r;
}

// Everything the engine told one request.
struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<std::pair<int32_t, float>>> top;
  std::vector<int64_t> steps;  // engine step (0-based) in which each token arrived
  std::vector<dew::inference::EngineToken> prompt_scores;  // EngineEvent::prompt, when it came
  int prompt_events = 0, prompt_event_token = -1;          // events carrying prompt scores; at which token
  FinishReason finish = FinishReason::running;
  int finals = 0;  // final events: exactly one
  std::string error;
  int64_t prompt_tokens = -1, completion_tokens = -1, cached_prompt_tokens = -1;
};

// Submits requests and records their events, with the step count at which each token arrived.
class Recorder {
 public:
  explicit Recorder(Engine& engine) : engine_(engine) {}
  // `keep_going(outcome)` is the callback's answer after a token (true: go on).
  int64_t submit(const EngineRequest& r, std::function<bool(const Outcome&)> keep_going = {}) {
    auto slot = std::make_shared<Outcome>();
    auto id = engine_.submit(r, [this, slot, keep_going](const EngineEvent& e) {
      if (!e.prompt.empty()) {
        slot->prompt_scores = e.prompt;
        slot->prompt_events += 1;
        slot->prompt_event_token = static_cast<int>(slot->tokens.size());
      }
      if (e.token) {
        slot->tokens.push_back(e.token->id);
        slot->logprobs.push_back(e.token->logprob);
        slot->top.push_back(e.token->top);
        slot->steps.push_back(steps_);
        EXPECT_EQ(e.finish, FinishReason::running);
        EXPECT_EQ(slot->finals, 0) << "a token after the final event";
        return keep_going ? keep_going(*slot) : true;
      }
      slot->finish = e.finish;
      slot->error = e.error;
      slot->prompt_tokens = e.prompt_tokens;
      slot->completion_tokens = e.completion_tokens;
      slot->cached_prompt_tokens = e.cached_prompt_tokens;
      slot->finals += 1;
      return true;
    });
    outcomes_[id] = slot;
    return id;
  }
  bool step() {
    bool worked = engine_.step();
    ++steps_;
    return worked;
  }
  void run() {
    while (step()) {}
  }
  const Outcome& operator[](int64_t id) const { return *outcomes_.at(id); }
  int64_t steps() const { return steps_; }

 private:
  Engine& engine_;
  int64_t steps_ = 0;
  std::map<int64_t, std::shared_ptr<Outcome>> outcomes_;
};

// Greedy decoding without a cache: the whole sequence through the model at every step.
std::vector<int32_t> greedy_without_cache(CausalTransformer& model, const Prompt& prompt, int64_t steps) {
  at::NoGradGuard no_grad;
  std::vector<int64_t> ids(prompt.begin(), prompt.end());
  std::vector<int32_t> out;
  for (int64_t t = 0; t < steps; ++t) {
    auto logits = model->forward({at::tensor(ids, at::kLong).view({1, -1})});
    ids.push_back(logits[0][-1].argmax().item<int64_t>());
    out.push_back(static_cast<int32_t>(ids.back()));
  }
  return out;
}

// log_softmax of one full forward over prompt + continuation at the positions that predict the continuation.
at::Tensor reference_log_softmax(CausalTransformer& model, const Prompt& prompt, const std::vector<int32_t>& continuation) {
  std::vector<int64_t> ids(prompt.begin(), prompt.end());
  ids.insert(ids.end(), continuation.begin(), continuation.end());
  at::NoGradGuard no_grad;
  auto logits = model->forward({at::tensor(ids, at::kLong).view({1, -1})})[0];
  return at::log_softmax(logits.narrow(0, static_cast<int64_t>(prompt.size()) - 1, static_cast<int64_t>(continuation.size())), -1);
}

// Submits kPrompts one every `stagger` steps into an engine with `options`; returns the outcomes in order.
std::vector<Outcome> staggered(CausalTransformer& model, const EngineOptions& options, const Sampling& sampling,
                               int64_t stagger, const std::vector<uint64_t>& seeds = {}) {
  Engine engine(model, options);
  Recorder recorder(engine);
  std::vector<int64_t> ids;
  for (int64_t step = 0; ids.size() < kPrompts.size() || !engine.idle(); ++step) {
    if (ids.size() < kPrompts.size() && step % stagger == 0) {
      auto s = sampling;
      if (!seeds.empty()) s.seed = seeds[ids.size()];
      ids.push_back(recorder.submit(request_of(kPrompts[ids.size()], s)));
    }
    recorder.step();
    EXPECT_LE(engine.stats().running, options.max_batch);
  }
  std::vector<Outcome> out;
  for (auto id : ids) out.push_back(recorder[id]);
  return out;
}

class EngineFamilies : public ::testing::TestWithParam<std::string> {};

// Rows of a batch are independent in the math; the engine keeps them independent in the arithmetic too
// on these models: every token equal, not merely close, to the prompt decoded alone and to decoding
// without any cache, whatever batch size, arrival time and prefill chunking it ran under.
TEST_P(EngineFamilies, GreedyTokensEqualGenerateAloneWhateverElseIsInTheBatch) {
  auto model = fixture_model(GetParam());
  const int64_t steps = 12;
  std::vector<std::vector<int32_t>> alone;
  std::vector<std::vector<float>> alone_logprobs;
  for (const auto& p : kPrompts) {
    auto g = dew::inference::generate(model, {p}, greedy(steps));
    alone.push_back(g.tokens[0]);
    alone_logprobs.push_back(g.logprobs[0]);
    EXPECT_EQ(g.tokens[0], greedy_without_cache(model, p, steps));
  }
  struct Setting {
    int64_t max_batch, budget, stagger;
  };
  for (auto setting : {Setting{2, 512, 1}, Setting{3, 512, 2}, Setting{3, 4, 1}, Setting{5, 6, 3}, Setting{1, 512, 1}}) {
    SCOPED_TRACE(::testing::Message() << "max_batch " << setting.max_batch << " budget " << setting.budget << " stagger "
                                      << setting.stagger);
    EngineOptions options;
    options.max_batch = setting.max_batch;
    options.step_token_budget = setting.budget;
    auto out = staggered(model, options, greedy(steps), setting.stagger);
    for (size_t i = 0; i < kPrompts.size(); ++i) {
      EXPECT_EQ(out[i].tokens, alone[i]) << "prompt " << i;
      EXPECT_EQ(out[i].finish, FinishReason::length);
      EXPECT_EQ(out[i].finals, 1);
      ASSERT_EQ(out[i].logprobs.size(), alone_logprobs[i].size());
      // Equal up to the order of float sums in a batched matmul (fp32, reductions of <= 48 terms).
      for (size_t t = 0; t < alone_logprobs[i].size(); ++t) EXPECT_NEAR(out[i].logprobs[t], alone_logprobs[i][t], 1e-5);
    }
  }
  EXPECT_TRUE(model->is_training());  // each step restores the caller's mode
}

// The prefix cache: keys and values at position j depend on tokens 0..j only, so a prompt that begins with
// what a row holds copies those slots and decodes exactly as if it had computed them. Three cases: the next
// turn of a finished conversation (its prompt = the earlier prompt + the answer + more), a prompt sharing only
// the first tokens of a longer row (the rest of that row must stay invisible), and two prompts arriving
// together (the second reuses what the first prefilled earlier in the same step).
TEST_P(EngineFamilies, PrefixCacheReusesHeldSlotsAndDecodesAsIfComputed) {
  auto model = fixture_model(GetParam());
  const Prompt& first = kPrompts[4];  // 9 tokens
  for (bool prefix_cache : {true, false}) {
    SCOPED_TRACE(::testing::Message() << "prefix_cache " << prefix_cache);
    EngineOptions options;
    options.max_batch = 2;
    options.prefix_cache = prefix_cache;
    Engine engine(model, options);
    Recorder recorder(engine);
    auto a = recorder.submit(request_of(first, greedy(6)));
    recorder.run();
    ASSERT_EQ(recorder[a].tokens, greedy_without_cache(model, first, 6));
    EXPECT_EQ(recorder[a].cached_prompt_tokens, 0);

    // The next turn: a's row holds its prompt and the five answer tokens fed back (the sixth never was).
    Prompt next = first;
    next.insert(next.end(), recorder[a].tokens.begin(), recorder[a].tokens.begin() + 3);
    next.insert(next.end(), {7, 9});
    auto b = recorder.submit(request_of(next, greedy(5)));
    recorder.run();
    EXPECT_EQ(recorder[b].cached_prompt_tokens, prefix_cache ? 12 : 0);
    EXPECT_EQ(recorder[b].tokens, greedy_without_cache(model, next, 5));

    // Only the first five tokens in common with both rows; the rows' later slots must not leak in.
    Prompt branch(first.begin(), first.begin() + 5);
    branch.insert(branch.end(), {21, 2});
    auto c = recorder.submit(request_of(branch, greedy(8)));
    recorder.run();
    EXPECT_EQ(recorder[c].cached_prompt_tokens, prefix_cache ? 5 : 0);
    EXPECT_EQ(recorder[c].tokens, greedy_without_cache(model, branch, 8));
    EXPECT_EQ(engine.stats().cached_prompt_tokens, prefix_cache ? 17 : 0);
    EXPECT_EQ(engine.stats().prompt_tokens, 9 + 14 + 7);

    // A request that scores its prompt computes every token, however much of it a row holds.
    auto scored = request_of(first, greedy(2));
    scored.prompt_logprobs = true;
    auto f = recorder.submit(scored);
    recorder.run();
    EXPECT_EQ(recorder[f].cached_prompt_tokens, 0);
    EXPECT_EQ(recorder[f].prompt_scores.size(), first.size() - 1);
    EXPECT_EQ(recorder[f].tokens, std::vector<int32_t>(recorder[a].tokens.begin(), recorder[a].tokens.begin() + 2));
  }
  // Together: d prefills in full, then e (first come, second served) reuses d's first six tokens in the same step.
  Engine engine(model, EngineOptions{});
  Recorder recorder(engine);
  Prompt shared = {12, 40, 3, 3, 9, 27};
  Prompt d_prompt = shared, e_prompt = shared;
  d_prompt.insert(d_prompt.end(), {1, 2, 3});
  e_prompt.insert(e_prompt.end(), {50, 51});
  auto d = recorder.submit(request_of(d_prompt, greedy(4)));
  auto e = recorder.submit(request_of(e_prompt, greedy(4)));
  recorder.step();
  EXPECT_EQ(recorder[d].steps, (std::vector<int64_t>{0}));
  EXPECT_EQ(recorder[e].steps, (std::vector<int64_t>{0}));
  recorder.run();
  EXPECT_EQ(recorder[d].cached_prompt_tokens, 0);
  EXPECT_EQ(recorder[e].cached_prompt_tokens, 6);
  EXPECT_EQ(recorder[d].tokens, greedy_without_cache(model, d_prompt, 4));
  EXPECT_EQ(recorder[e].tokens, greedy_without_cache(model, e_prompt, 4));
}

INSTANTIATE_TEST_SUITE_P(Families, EngineFamilies, ::testing::Values("llama", "qwen3", "llama_sliding"));

TEST(Engine, AFinishedRequestFreesItsSlotForAWaitingOne) {
  auto model = fixture_model("llama");
  EngineOptions options;
  options.max_batch = 2;
  Engine engine(model, options);
  Recorder recorder(engine);
  auto a = recorder.submit(request_of(kPrompts[0], greedy(2)));
  auto b = recorder.submit(request_of(kPrompts[1], greedy(6)));
  auto c = recorder.submit(request_of(kPrompts[2], greedy(3)));
  EXPECT_EQ(engine.stats().waiting, 3);
  recorder.step();  // step 0: a and b admitted and prefilled (first tokens); c waits
  EXPECT_EQ(engine.stats().running, 2);
  EXPECT_EQ(engine.stats().waiting, 1);
  recorder.step();  // step 1: a's second token ends it; its slot is free at once
  EXPECT_EQ(recorder[a].finish, FinishReason::length);
  EXPECT_EQ(engine.stats().running, 1);
  EXPECT_EQ(engine.stats().waiting, 1);
  recorder.step();  // step 2: c joins and gets its first token beside b's third
  EXPECT_EQ(engine.stats().running, 2);
  EXPECT_EQ(engine.stats().waiting, 0);
  EXPECT_EQ(recorder[c].steps, (std::vector<int64_t>{2}));
  recorder.run();
  EXPECT_EQ(recorder[b].steps, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(recorder[c].steps, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(recorder[b].completion_tokens, 6);
  EXPECT_EQ(recorder[b].prompt_tokens, 7);
  EXPECT_TRUE(engine.idle());
  auto stats = engine.stats();
  EXPECT_EQ(stats.generated_tokens, 2 + 6 + 3);
  EXPECT_EQ(stats.prompt_tokens, 3 + 7 + 5);
  EXPECT_EQ(stats.steps, 6);
  EXPECT_FALSE(engine.step());  // nothing left
}

TEST(Engine, OneSlotStillCompletesEveryRequestInOrder) {
  auto model = fixture_model("qwen3");
  EngineOptions options;
  options.max_batch = 1;
  Engine engine(model, options);
  Recorder recorder(engine);
  std::vector<int64_t> ids;
  for (const auto& p : kPrompts) ids.push_back(recorder.submit(request_of(p, greedy(4))));
  recorder.run();
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(recorder[ids[i]].finish, FinishReason::length);
    // One at a time: request i's four tokens in steps 4i .. 4i + 3.
    EXPECT_EQ(recorder[ids[i]].steps, (std::vector<int64_t>{4 * int64_t(i), 4 * int64_t(i) + 1, 4 * int64_t(i) + 2, 4 * int64_t(i) + 3}));
    EXPECT_EQ(recorder[ids[i]].tokens, greedy_without_cache(model, kPrompts[i], 4));
  }
}

TEST(Engine, CancelEndsAQueuedOrARunningRequestAndFreesItsSlot) {
  auto model = fixture_model("llama");
  EngineOptions options;
  options.max_batch = 1;
  Engine engine(model, options);
  Recorder recorder(engine);
  auto running = recorder.submit(request_of(kPrompts[0], greedy(10)));
  auto queued = recorder.submit(request_of(kPrompts[1], greedy(10)));
  auto later = recorder.submit(request_of(kPrompts[2], greedy(2)));
  engine.cancel(queued);  // before any step: it never runs
  EXPECT_EQ(recorder[queued].finish, FinishReason::cancelled);
  EXPECT_EQ(recorder[queued].completion_tokens, 0);
  EXPECT_EQ(engine.stats().waiting, 2);
  recorder.step();
  recorder.step();
  EXPECT_EQ(recorder[running].tokens.size(), 2u);
  engine.cancel(running);
  EXPECT_EQ(recorder[running].finish, FinishReason::cancelled);
  EXPECT_EQ(recorder[running].completion_tokens, 2);
  EXPECT_EQ(engine.stats().running, 0);  // freed at once
  engine.cancel(running);                // a second cancel, and an unknown id, change nothing
  engine.cancel(12345);
  EXPECT_EQ(recorder[running].finals, 1);
  recorder.step();
  EXPECT_EQ(recorder[later].steps, (std::vector<int64_t>{2}));  // the freed slot took the next request
  recorder.run();
  EXPECT_EQ(recorder[later].finish, FinishReason::length);
  EXPECT_TRUE(recorder[queued].tokens.empty());
  EXPECT_EQ(recorder[queued].finals, 1);
}

TEST(Engine, ACallbackReturningFalseStopsItsRequest) {
  auto model = fixture_model("llama");
  Engine engine(model, EngineOptions{});
  Recorder recorder(engine);
  auto stopped = recorder.submit(request_of(kPrompts[1], greedy(10)), [](const Outcome& o) { return o.tokens.size() < 3; });
  auto other = recorder.submit(request_of(kPrompts[0], greedy(10)));
  recorder.run();
  EXPECT_EQ(recorder[stopped].finish, FinishReason::stopped);
  EXPECT_EQ(recorder[stopped].tokens.size(), 3u);
  EXPECT_EQ(recorder[stopped].completion_tokens, 3);
  EXPECT_EQ(recorder[stopped].tokens, greedy_without_cache(model, kPrompts[1], 3));
  EXPECT_EQ(recorder[other].finish, FinishReason::length);
  EXPECT_EQ(recorder[other].tokens.size(), 10u);
}

TEST(Engine, EosAndLengthEndRequests) {
  auto model = fixture_model("llama");
  auto free_run = greedy_without_cache(model, kPrompts[1], 10);
  // An EOS first produced at index >= 2 (so the request ends there, not earlier).
  size_t stop = 2;
  while (std::find(free_run.begin(), free_run.begin() + stop, free_run[stop]) != free_run.begin() + stop) ++stop;
  ASSERT_LT(stop, free_run.size());
  auto s = greedy(10);
  s.eos_ids = {free_run[stop]};
  Engine engine(model, EngineOptions{});
  Recorder recorder(engine);
  auto eos = recorder.submit(request_of(kPrompts[1], s));
  auto length = recorder.submit(request_of(kPrompts[1], greedy(4)));
  recorder.run();
  EXPECT_EQ(recorder[eos].finish, FinishReason::eos);
  EXPECT_EQ(recorder[eos].tokens, std::vector<int32_t>(free_run.begin(), free_run.begin() + stop + 1));  // EOS kept
  EXPECT_EQ(recorder[length].finish, FinishReason::length);
  EXPECT_EQ(recorder[length].tokens, std::vector<int32_t>(free_run.begin(), free_run.begin() + 4));
}

// A request's draws come from its own stream (seed, token index): alone or among four others with other
// seeds, settings, lengths and arrival times, the same sampled tokens.
TEST(Engine, SampledTokensDependOnlyOnTheRequestsOwnSeed) {
  auto model = fixture_model("qwen3");
  Sampling s;
  s.temperature = 1.0;
  s.top_p = 0.95;
  s.max_new_tokens = 12;
  s.seed = 77;
  EngineRequest request = request_of(kPrompts[2], s);
  request.frequency_penalty = 0.5;

  Engine alone_engine(model, EngineOptions{});
  Recorder alone(alone_engine);
  auto a = alone.submit(request);
  alone.run();

  EngineOptions options;
  options.max_batch = 3;
  options.step_token_budget = 5;
  Engine busy_engine(model, options);
  Recorder busy(busy_engine);
  for (int i = 0; i < 2; ++i) {
    auto other = request_of(kPrompts[i], s);
    other.sampling.seed = 1000 + i;
    other.sampling.temperature = 0.5 + i;
    busy.submit(other);
  }
  busy.step();
  auto b = busy.submit(request);
  auto greedy_neighbour = busy.submit(request_of(kPrompts[4], greedy(7)));
  busy.step();
  busy.submit(request_of(kPrompts[3], s));
  busy.run();
  EXPECT_EQ(busy[b].tokens, alone[a].tokens);
  EXPECT_EQ(busy[b].tokens.size(), 12u);
  EXPECT_EQ(busy[greedy_neighbour].tokens, greedy_without_cache(model, kPrompts[4], 7));

  // And the seed matters: another seed gives other tokens.
  request.sampling.seed = 78;
  Engine other_engine(model, EngineOptions{});
  Recorder other(other_engine);
  auto c = other.submit(request);
  other.run();
  EXPECT_NE(other[c].tokens, alone[a].tokens);
}

// The engine samples a step's requests together, one pass of the filters per group of equal settings; each
// request still draws from its own stream, so every one gets the tokens it gets alone, whatever its group.
TEST(Engine, RequestsSampledTogetherGetTheTokensTheyGetAlone) {
  auto model = fixture_model("llama");
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 8; ++i) {
    Sampling s;
    s.max_new_tokens = 10;
    s.seed = 500 + static_cast<uint64_t>(i);
    if (i % 4 == 0) {
      s.temperature = 0.8, s.top_p = 0.9;    // group A
    } else if (i % 4 == 1) {
      s.temperature = 1.3, s.top_k = 7;      // group B
    } else if (i % 4 == 2) {
      s.temperature = 0.0, s.repetition_penalty = 1.4;  // greedy with a penalty: through the groups too
    } else {
      s.temperature = 0.8, s.top_p = 0.9;    // group A again, with penalties of its own
    }
    auto r = request_of(kPrompts[static_cast<size_t>(i) % 4], s);  // requests i and i + 4: one prompt, two seeds
    if (i % 4 == 3) r.presence_penalty = 0.7, r.frequency_penalty = 0.3;
    requests.push_back(r);
  }
  Engine together_engine(model, EngineOptions{});
  Recorder together(together_engine);
  std::vector<int64_t> ids;
  for (const auto& r : requests) ids.push_back(together.submit(r));
  together.run();
  for (size_t i = 0; i < requests.size(); ++i) {
    Engine alone_engine(model, EngineOptions{});
    Recorder alone(alone_engine);
    auto a = alone.submit(requests[i]);
    alone.run();
    EXPECT_EQ(together[ids[i]].tokens, alone[a].tokens) << "request " << i;
    EXPECT_EQ(together[ids[i]].tokens.size(), 10u);
  }
  EXPECT_NE(together[ids[0]].tokens, together[ids[4]].tokens);  // same settings, other seeds: other draws
}

// Requests with one prompt admitted together (n continuations, GRPO's groups) share its prefill: one
// forward, the row copied; each still gives what it gives alone.
TEST(Engine, RequestsWithTheSamePromptShareItsPrefillAndStillMatchAlone) {
  auto model = fixture_model("llama");
  Sampling s;
  s.temperature = 1.0;
  s.max_new_tokens = 6;
  std::vector<std::vector<int32_t>> alone;
  for (uint64_t seed : {5u, 6u, 7u}) {
    s.seed = seed;
    Engine engine(model, EngineOptions{});
    Recorder recorder(engine);
    auto id = recorder.submit(request_of(kPrompts[1], s));
    recorder.run();
    alone.push_back(recorder[id].tokens);
  }
  EngineOptions options;
  options.step_token_budget = 7;  // room for one prompt of 7 tokens: the other two must be copies
  Engine engine(model, options);
  Recorder recorder(engine);
  std::vector<int64_t> ids;
  for (uint64_t seed : {5u, 6u, 7u}) {
    s.seed = seed;
    ids.push_back(recorder.submit(request_of(kPrompts[1], s)));
  }
  recorder.step();
  EXPECT_EQ(engine.stats().prompt_tokens, 21);  // every request's prompt is in, after one step
  recorder.run();
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(recorder[ids[i]].tokens, alone[i]) << "seed " << 5 + i;
    EXPECT_EQ(recorder[ids[i]].steps.front(), 0);
  }
  EXPECT_NE(alone[0], alone[1]);
}

// log p(token) is log_softmax of the raw logits. The engine's and a full forward's logits differ only in
// the order of fp32 sums (32 features, 48 MLP features, two layers): a few ulp of values of magnitude ~1-5,
// so 1e-5 absolute holds with a wide margin and still catches any processed (tempered, penalised) value.
TEST(Engine, LogprobsAreTheRawLogSoftmaxAndTopLogprobsAreSorted) {
  auto model = fixture_model("llama");
  Engine engine(model, EngineOptions{});
  Recorder recorder(engine);
  auto g = request_of(kPrompts[1], greedy(8));
  g.top_logprobs = 5;
  auto greedy_id = recorder.submit(g);
  Sampling s;
  s.temperature = 0.7;
  s.repetition_penalty = 1.5;
  s.top_k = 10;
  s.seed = 3;
  s.max_new_tokens = 8;
  auto sampled = request_of(kPrompts[4], s);
  sampled.top_logprobs = 20;
  auto sampled_id = recorder.submit(sampled);
  recorder.run();

  for (auto [id, prompt, k] : {std::tuple{greedy_id, kPrompts[1], 5}, std::tuple{sampled_id, kPrompts[4], 20}}) {
    const auto& o = recorder[id];
    ASSERT_EQ(o.tokens.size(), 8u);
    auto reference = reference_log_softmax(model, prompt, o.tokens);
    for (size_t t = 0; t < o.tokens.size(); ++t) {
      EXPECT_NEAR(o.logprobs[t], reference[t][o.tokens[t]].item<float>(), 1e-5) << "request " << id << " token " << t;
      ASSERT_EQ(o.top[t].size(), static_cast<size_t>(k));
      auto [values, ids] = at::topk(reference[t], k);
      for (int j = 0; j < k; ++j) {
        if (j > 0) {
          EXPECT_GE(o.top[t][j - 1].second, o.top[t][j].second);  // most likely first
        }
        EXPECT_NEAR(o.top[t][j].second, values[j].item<float>(), 1e-5);
        EXPECT_NEAR(reference[t][o.top[t][j].first].item<float>(), o.top[t][j].second, 1e-5);
      }
    }
  }
  // Greedy picks the argmax: the first alternative is the chosen token with its own log-probability.
  const auto& o = recorder[greedy_id];
  for (size_t t = 0; t < o.tokens.size(); ++t) {
    EXPECT_EQ(o.top[t][0].first, o.tokens[t]);
    EXPECT_EQ(o.top[t][0].second, o.logprobs[t]);
  }
  // Without top_logprobs, no alternatives.
  Engine plain_engine(model, EngineOptions{});
  Recorder plain(plain_engine);
  auto p = plain.submit(request_of(kPrompts[0], greedy(2)));
  plain.run();
  EXPECT_TRUE(plain[p].top[0].empty());
}

// Echo with logprobs: each prompt token after the first scored by the same forward that prefills it, chunk
// by chunk (a budget of 4 cuts the 9-token prompt 4 + 4 + 1), against a full forward's log_softmax (the 1e-5
// bound of the test above: the same sums in another order). Reported once, with the first token; a twin
// with the same prompt and settings gets the same scores from the shared prefill, one without asks for none.
TEST(Engine, PromptLogprobsScoreEveryPromptTokenAcrossPrefillChunks) {
  auto model = fixture_model("llama");
  const auto& prompt = kPrompts[4];
  EngineOptions options;
  options.step_token_budget = 4;
  Engine engine(model, options);
  Recorder recorder(engine);
  auto scored = request_of(prompt, greedy(3));
  scored.prompt_logprobs = true;
  scored.top_logprobs = 3;
  auto first = recorder.submit(scored);
  recorder.run();
  Engine shared(model, EngineOptions{});  // the default budget prefills the prompt whole, once for both twins
  Recorder twins(shared);
  auto twin_a = twins.submit(scored), twin_b = twins.submit(scored);
  auto plain = twins.submit(request_of(prompt, greedy(3)));
  twins.step();
  EXPECT_EQ(shared.stats().prompt_tokens, 27);  // three prompts in after one step: the twins' and plain's copies
  twins.run();

  at::Tensor reference;
  {
    at::NoGradGuard no_grad;
    std::vector<int64_t> ids(prompt.begin(), prompt.end());
    reference = at::log_softmax(model->forward({at::tensor(ids, at::kLong).view({1, -1})})[0], -1);  // [9, vocab]
  }
  for (auto [id, from] : {std::pair{first, &recorder}, std::pair{twin_a, &twins}, std::pair{twin_b, &twins}}) {
    const auto& o = (*from)[id];
    EXPECT_EQ(o.prompt_events, 1) << id;
    EXPECT_EQ(o.prompt_event_token, 0) << "with the first generated token";
    ASSERT_EQ(o.prompt_scores.size(), prompt.size() - 1) << id;
    for (size_t j = 0; j + 1 < prompt.size(); ++j) {
      const auto& token = o.prompt_scores[j];
      EXPECT_EQ(token.id, prompt[j + 1]);
      EXPECT_NEAR(token.logprob, reference[j][prompt[j + 1]].item<float>(), 1e-5) << "prompt token " << j + 1;
      ASSERT_EQ(token.top.size(), 3u);
      auto [values, top_ids] = at::topk(reference[j], 3);
      for (int t = 0; t < 3; ++t) {
        EXPECT_NEAR(token.top[t].second, values[t].item<float>(), 1e-5);
        EXPECT_NEAR(reference[j][token.top[t].first].item<float>(), token.top[t].second, 1e-5);
      }
    }
    EXPECT_EQ(o.tokens, twins[plain].tokens) << "scoring the prompt changes nothing generated";
  }
  EXPECT_EQ(twins[twin_a].prompt_scores[2].logprob, twins[twin_b].prompt_scores[2].logprob);
  EXPECT_EQ(twins[plain].prompt_events, 0);
}

// OpenAI's penalties on greedy decoding against a cache-free loop that applies them by hand.
TEST(Engine, PresenceAndFrequencyPenaltiesMatchAHandReference) {
  auto model = fixture_model("llama");
  const double presence = 0.8, frequency = 0.6;
  auto request = request_of(kPrompts[0], greedy(10));
  request.presence_penalty = presence;
  request.frequency_penalty = frequency;
  Engine engine(model, EngineOptions{});
  Recorder recorder(engine);
  auto id = recorder.submit(request);
  recorder.run();

  at::NoGradGuard no_grad;
  std::vector<int64_t> ids(kPrompts[0].begin(), kPrompts[0].end());
  std::map<int64_t, int> counts;  // generated tokens only: the prompt is not penalised
  std::vector<int32_t> expected;
  for (int t = 0; t < 10; ++t) {
    auto logits = model->forward({at::tensor(ids, at::kLong).view({1, -1})})[0][-1].clone();
    auto l = logits.accessor<float, 1>();
    for (auto [token, count] : counts) l[token] -= static_cast<float>(frequency * count + presence);
    ids.push_back(logits.argmax().item<int64_t>());
    counts[ids.back()] += 1;
    expected.push_back(static_cast<int32_t>(ids.back()));
  }
  EXPECT_EQ(recorder[id].tokens, expected);
  EXPECT_NE(expected, greedy_without_cache(model, kPrompts[0], 10));  // the penalties changed something
}

TEST(Engine, NonFiniteLogitsEndTheRequestWithAnErrorNamingTheStep) {
  auto model = fixture_model("llama");
  {
    at::NoGradGuard no_grad;
    model->output_weight().fill_(std::numeric_limits<float>::quiet_NaN());
  }
  Engine engine(model, EngineOptions{});
  Recorder recorder(engine);
  auto id = recorder.submit(request_of(kPrompts[0], greedy(3)));
  recorder.run();
  EXPECT_EQ(recorder[id].finish, FinishReason::error);
  EXPECT_NE(recorder[id].error.find("non-finite logits at step 1"), std::string::npos) << recorder[id].error;
  EXPECT_TRUE(recorder[id].tokens.empty());
  EXPECT_TRUE(engine.idle());
}

TEST(Engine, ACallbackThatThrowsEndsItsRequestAndTheErrorSurfacesAfterTheStep) {
  auto model = fixture_model("llama");
  Engine engine(model, EngineOptions{});
  std::vector<FinishReason> finals;
  engine.submit(request_of(kPrompts[0], greedy(5)), [&](const EngineEvent& e) -> bool {
    if (e.token) throw dew::Error("client gone");
    finals.push_back(e.finish);
    return true;
  });
  EXPECT_EQ(error_of([&] { engine.step(); }), "client gone");
  EXPECT_EQ(finals, (std::vector<FinishReason>{FinishReason::stopped}));
  EXPECT_TRUE(engine.idle());
}

TEST(Engine, BadRequestsAndOptionsAreRefusedByField) {
  auto model = fixture_model("llama");  // max_seq_len 32, vocabulary 64
  EngineOptions options;
  options.context = 20;
  Engine engine(model, options);
  auto refused = [&](const EngineRequest& r) { return error_of([&] { engine.submit(r, {}); }); };
  auto contains = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  auto m = refused(request_of({}, greedy(4)));
  EXPECT_TRUE(contains(m, "prompt is empty")) << m;
  m = refused(request_of({1, 64}, greedy(4)));
  EXPECT_TRUE(contains(m, "token id 64 at index 1")) << m;
  EXPECT_TRUE(contains(m, "[0, 64)")) << m;
  m = refused(request_of(Prompt(15, 1), greedy(6)));
  EXPECT_TRUE(contains(m, "prompt has 15 tokens and sampling.max_new_tokens is 6")) << m;
  EXPECT_TRUE(contains(m, "context of 20")) << m;
  EXPECT_EQ(error_of([&] { engine.submit(request_of(Prompt(15, 1), greedy(5)), {}); }), "(no error)");  // 15 + 5 fits
  auto two = greedy(4);
  two.n = 2;
  m = refused(request_of({1}, two));
  EXPECT_TRUE(contains(m, "sampling.n is 2")) << m;
  auto bad = greedy(4);
  bad.top_p = 0;
  EXPECT_TRUE(contains(refused(request_of({1}, bad)), "sampling.top_p"));
  bad = greedy(4);
  bad.eos_ids = {64};
  EXPECT_TRUE(contains(refused(request_of({1}, bad)), "sampling.eos_ids holds 64"));
  auto r = request_of({1}, greedy(4));
  r.presence_penalty = 2.5;
  EXPECT_TRUE(contains(refused(r), "presence_penalty is 2.5"));
  r.presence_penalty = 0;
  r.frequency_penalty = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(contains(refused(r), "frequency_penalty is nan"));
  r.frequency_penalty = 0;
  r.top_logprobs = 21;
  EXPECT_TRUE(contains(refused(r), "top_logprobs is 21"));

  EngineOptions too_long;
  too_long.context = 33;
  m = error_of([&] { Engine e(model, too_long); });
  EXPECT_TRUE(contains(m, "context is 33")) << m;
  EngineOptions no_slots;
  no_slots.max_batch = 0;
  EXPECT_TRUE(contains(error_of([&] { Engine e(model, no_slots); }), "max_batch is 0"));
  EngineOptions no_budget;
  no_budget.step_token_budget = 0;
  EXPECT_TRUE(contains(error_of([&] { Engine e(model, no_budget); }), "step_token_budget is 0"));
  EXPECT_EQ(engine.stats().waiting, 1);  // only the request that fitted was queued
}

}  // namespace
