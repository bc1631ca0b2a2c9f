// The Trainer end to end on tiny decoders: PyTorch AdamW parity through fit(), gradient accumulation,
// exact resume, NaN stop, SIGTERM, corrupt checkpoints, pruning, scalars.jsonl and plots, CUDA.
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cmath>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "dew/core/atomic_file.h"
#include "dew/core/interrupt.h"
#include "dew/data/token_windows.h"
#include "dew/objectives/lm_objective.h"
#include "dew/telemetry/local_tracker.h"
#include "dew/training/checkpoint.h"
#include "dew/training/trainer.h"
#include "training_test_support.h"

using dew::test::error_of;

namespace {
namespace fs = std::filesystem;
using namespace dew::training;
using dew::objectives::LMObjective;
using dew::test::TempDir;

// SIGTERM to the interrupt watcher's thread (core/interrupt.h), which fit() starts here, and waits
// until the watcher has recorded it. Not to the process: this test process may hold threads started before
// the watcher (an earlier test's OpenMP pool) with the signal unblocked, and the kernel, picking one of them,
// would end the process.
void sigterm_to_the_interrupt_watcher() {
  bool sent = false;
  for (const auto& task : fs::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name == "dew-interrupts") {
      sent = ::syscall(SYS_tgkill, ::getpid(), std::stoi(task.path().filename().string()), SIGTERM) == 0;
      break;
    }
  }
  ASSERT_TRUE(sent) << "no interrupt watcher thread to signal";
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (dew::graceful_stop_signal() == 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(dew::graceful_stop_signal(), SIGTERM);
}

constexpr std::int64_t kSeqLen = 8;

LMObjective tiny_objective() { return LMObjective(dew::nn::CausalTransformer(dew::test::tiny_decoder_config()), {.seq_len = kSeqLen}); }

dew::data::TokenWindows windows(const fs::path& dir, dew::data::Split split, std::uint64_t seed = 3) {
  dew::data::TokenLoaderOptions options;
  options.split = split;
  options.seed = seed;
  return dew::data::TokenWindows(dir, kSeqLen, options);
}

TrainerConfig small_run(std::int64_t steps) {
  TrainerConfig c;
  c.steps = steps;
  c.batch_size = 4;
  c.log_every = 1;
  c.eval_every = 0;
  c.checkpoint_every = 3;
  c.keep_checkpoints = 0;
  c.ema_decay = 0.9;
  c.device = "cpu";
  c.peak_flops = 1e9;  // skip the start-up matmul measurement
  return c;
}

OptimConfig small_optim() { return {.name = "adamw", .learning_rate = 1e-2, .schedule = "cosine", .warmup_steps = 2}; }

FitResult train(const fs::path& data, const fs::path& run, TrainerConfig config, OptimConfig optim = small_optim(),
                LMObjective* objective_out = nullptr) {
  auto objective = tiny_objective();
  auto source = windows(data, dew::data::Split::train);
  auto val = windows(data, dew::data::Split::val);
  Trainer trainer(objective_out ? *objective_out : objective, optim, config, run);
  trainer.set_output(nullptr);
  return trainer.fit(source, &val);
}

TEST(Trainer, FitReproducesTorchAdamWWithAndWithoutAccumulation) {
  dew::test::SingleThreaded threads;
  for (std::string family : {"qwen3", "llama"}) {
    for (std::int64_t accum : {1, 2}) {
      auto dir = dew::test::fixtures() / "lm" / family;
      auto expected = nlohmann::json::parse(dew::read_file(dir / "adamw.json"));
      const auto& s = expected["settings"];
      auto text = dew::formats::SafetensorsFile(dir / "io.safetensors").load("text");
      LMObjective objective(dew::test::fixture_decoder(family), {.seq_len = text.size(1) - 1});
      dew::test::RepeatingBatches batches(text);
      OptimConfig optim{.name = "adamw", .learning_rate = s["lr"].get<double>(), .beta1 = s["betas"][0].get<double>(),
                        .beta2 = s["betas"][1].get<double>(), .eps = s["eps"].get<double>(),
                        .weight_decay = s["weight_decay"].get<double>(), .grad_clip_norm = 0, .schedule = "constant"};
      TrainerConfig config;
      config.steps = 10;
      config.batch_size = text.size(0);
      config.grad_accum = accum;
      config.ema_decay = 0;
      config.device = "cpu";
      config.peak_flops = 1e9;
      TempDir run;
      Trainer trainer(objective, optim, config, run.path());
      trainer.set_output(nullptr);
      trainer.use_current_parameters();
      std::vector<double> losses;
      trainer.set_step_callback([&](std::int64_t, const std::map<std::string, double>& scalars) { losses.push_back(scalars.at("loss")); });
      auto result = trainer.fit(batches);
      EXPECT_EQ(result.step, 10);
      ASSERT_EQ(losses.size(), 10u);
      for (std::size_t i = 0; i < 10; ++i) EXPECT_NEAR(losses[i], expected["losses"][i].get<double>(), dew::test::kAdamWLossTolerance) << family << " step " << i;
      dew::formats::SafetensorsFile final_params(dir / "adamw_final.safetensors"), initial(dir / "weights.safetensors");
      for (const auto& [name, p] : dew::nn::parameter_map(objective.module())) {
        EXPECT_LT(dew::test::adamw_relative_difference(p, final_params.load(name), initial.load(name)),
                  dew::test::kAdamWRelativeTolerance)
            << family << " accum " << accum << " " << name;
      }
    }
  }
}

// A real objective that records the trainer's after_step calls.
class RecordingObjective final : public dew::objectives::Objective {
 public:
  RecordingObjective() : inner_(tiny_objective()) {}
  std::string name() const override { return inner_.name(); }
  void init(std::uint64_t seed) override { inner_.init(seed); }
  torch::nn::Module& module() override { return inner_.module(); }
  dew::objectives::Loss loss(const dew::data::Batch& batch, std::int64_t step) override { return inner_.loss(batch, step); }
  dew::objectives::Statistics evaluate(const dew::data::Batch& batch) override { return inner_.evaluate(batch); }
  nlohmann::ordered_json config_json() const override { return inner_.config_json(); }
  void after_step(std::int64_t step, std::int64_t total) override { calls.emplace_back(step, total); }
  std::vector<std::pair<std::int64_t, std::int64_t>> calls;

 private:
  LMObjective inner_;
};

TEST(Trainer, CallsAfterStepOncePerOptimizerStepIncludingAfterResume) {
  dew::test::SingleThreaded threads;
  TempDir data, run;
  dew::test::write_tiny_tokens(data.path());
  auto fit = [&](std::int64_t steps) {
    RecordingObjective objective;
    auto source = windows(data.path(), dew::data::Split::train);
    auto config = small_run(steps);
    config.grad_accum = 2;  // two micro-batches, one optimizer step: one call
    Trainer trainer(objective, small_optim(), config, run.path());
    trainer.set_output(nullptr);
    trainer.fit(source);
    return objective.calls;
  };
  using Calls = std::vector<std::pair<std::int64_t, std::int64_t>>;
  EXPECT_EQ(fit(3), (Calls{{0, 3}, {1, 3}, {2, 3}}));
  EXPECT_EQ(fit(5), (Calls{{3, 5}, {4, 5}}));  // resumed from step 3
}

TEST(Trainer, TraceStepWritesThatStepsOpsAsAChromeTraceAndChangesNothing) {
  dew::test::SingleThreaded threads;
  TempDir data, plain, traced;
  dew::test::write_tiny_tokens(data.path());
  auto config = small_run(3);
  const auto untraced = train(data.path(), plain.path(), config);
  config.trace_step = 2;
  const auto result = train(data.path(), traced.path(), config);
  // The profiler observes; the numbers are the same.
  EXPECT_EQ(result.metrics.at("loss"), untraced.metrics.at("loss"));
  EXPECT_EQ(result.metrics.at("grad_norm"), untraced.metrics.at("grad_norm"));

  const auto trace = traced.path() / "trace" / "step-2.json";
  ASSERT_TRUE(fs::exists(trace));
  EXPECT_EQ(std::distance(fs::directory_iterator(traced.path() / "trace"), fs::directory_iterator()), 1);  // no temporaries
  const auto events = nlohmann::json::parse(std::ifstream(trace));
  std::set<std::string> ops;
  for (const auto& e : events) {
    if (e.value("ph", "") == "X") ops.insert(e.value("name", ""));
  }
  EXPECT_TRUE(ops.count("aten::mm") || ops.count("mkldnn::_linear_pointwise")) << "a training step without a matmul?";
  EXPECT_FALSE(fs::exists(plain.path() / "trace"));

  config.trace_step = -1;
  EXPECT_NE(error_of([&] { config.validate(); }).find("trainer.trace_step must be >= 0"), std::string::npos);
}

TEST(Trainer, TwoHalfBatchesEqualOneFullBatch) {
  dew::test::SingleThreaded threads;
  TempDir data, a, b;
  dew::test::write_tiny_tokens(data.path());
  auto config = small_run(1);
  config.ema_decay = 0;
  OptimConfig sgd{.name = "sgd", .learning_rate = 1.0, .weight_decay = 0, .momentum = 0, .grad_clip_norm = 0, .schedule = "constant"};
  auto one = tiny_objective(), two = tiny_objective();
  train(data.path(), a.path(), config, sgd, &one);
  config.grad_accum = 2;
  train(data.path(), b.path(), config, sgd, &two);
  auto pa = dew::nn::parameter_map(one.module()), pb = dew::nn::parameter_map(two.module());
  double largest_grad = 0;
  for (const auto& [name, p] : pa) {
    const auto& ga = p.grad();
    const auto& gb = pb.at(name).grad();
    largest_grad = std::max(largest_grad, ga.abs().max().item<double>());
    EXPECT_LT((ga - gb).abs().max().item<double>(), 1e-6) << name;
    EXPECT_LT((p - pb.at(name)).abs().max().item<double>(), 1e-6) << name;  // lr 1: the step is the gradient
  }
  EXPECT_GT(largest_grad, 1e-3);
}

TEST(Trainer, ResumedRunMatchesAnUninterruptedOneBitForBit) {
  dew::test::SingleThreaded threads;
  TempDir data, straight, stopped;
  dew::test::write_tiny_tokens(data.path());
  auto a = tiny_objective(), b = tiny_objective();
  auto full = train(data.path(), straight.path(), small_run(6), small_optim(), &a);
  EXPECT_EQ(full.step, 6);
  auto half = train(data.path(), stopped.path(), small_run(3), small_optim());
  EXPECT_EQ(half.step, 3);
  EXPECT_EQ(checkpoint_steps(stopped.path()), (std::vector<std::int64_t>{3}));
  auto resumed = train(data.path(), stopped.path(), small_run(6), small_optim(), &b);  // a new trainer, objective and loader
  EXPECT_EQ(resumed.step, 6);

  auto pa = dew::nn::parameter_map(a.module()), pb = dew::nn::parameter_map(b.module());
  for (const auto& [name, p] : pa) EXPECT_TRUE(at::equal(p, pb.at(name))) << name;
  Checkpoint ca(straight.path() / "6"), cb(stopped.path() / "6");
  for (const auto& name : ca.ema().names()) EXPECT_TRUE(at::equal(ca.ema().whole(name), cb.ema().whole(name))) << name;
  for (const auto& name : ca.optimizer().names()) EXPECT_TRUE(at::equal(ca.optimizer().whole(name), cb.optimizer().whole(name))) << name;
  EXPECT_EQ(ca.state().data_position, cb.state().data_position);
  EXPECT_EQ(ca.state().data_position, 6 * 4);
  EXPECT_EQ(ca.state().tokens_seen, cb.state().tokens_seen);

  auto ra = dew::telemetry::read_scalars(straight.path() / "tracking" / "scalars.jsonl");
  auto rb = dew::telemetry::read_scalars(stopped.path() / "tracking" / "scalars.jsonl");
  ASSERT_EQ(ra.size(), 6u);
  ASSERT_EQ(rb.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(ra[i].step, static_cast<std::int64_t>(i + 1));
    EXPECT_EQ(rb[i].step, ra[i].step);
    EXPECT_EQ(ra[i].scalars.at("loss"), rb[i].scalars.at("loss")) << "step " << i + 1;
  }
  // Training again to the same total does nothing.
  auto again = train(data.path(), stopped.path(), small_run(6), small_optim());
  EXPECT_EQ(again.step, 6);
  EXPECT_EQ(dew::telemetry::read_scalars(stopped.path() / "tracking" / "scalars.jsonl").size(), 6u);
}

// state.json of a resumed run equals the uninterrupted run's, rng_state included, with the start-up peak
// measurement on: it runs after a resumed run restores the checkpoint's CPU generator state, and it drew its
// operands from that generator, so the resumed run's rng_state (and any later CPU draw) was shifted. Only
// the wall-clock fields may differ: elapsed_seconds and the timing scalars.
TEST(Trainer, ResumedRunsStateJsonEqualsTheUninterruptedOnes) {
  dew::test::SingleThreaded threads;
  TempDir data, straight, stopped;
  dew::test::write_tiny_tokens(data.path());
  auto measured = [](std::int64_t steps) {
    auto c = small_run(steps);
    c.peak_flops = 0;  // measured at every start, as in a default run
    return c;
  };
  train(data.path(), straight.path(), measured(6));
  train(data.path(), stopped.path(), measured(3));
  train(data.path(), stopped.path(), measured(6));
  auto state = [](const fs::path& checkpoint) {
    auto j = nlohmann::json::parse(dew::read_file(checkpoint / "state.json"));
    j.erase("elapsed_seconds");
    for (const char* timing : {"step_seconds", "tokens_per_second", "mfu"}) j["metrics"].erase(timing);
    return j;
  };
  const auto a = state(straight.path() / "6"), b = state(stopped.path() / "6");
  EXPECT_FALSE(a["rng_state"].get<std::string>().empty());
  EXPECT_EQ(a["rng_state"], b["rng_state"]);
  EXPECT_EQ(a, b);
}

class NanAtStep final : public dew::objectives::Objective {
 public:
  NanAtStep(LMObjective& inner, std::int64_t bad_step) : inner_(inner), bad_step_(bad_step) {}
  std::string name() const override { return "nan-at-step"; }
  void init(std::uint64_t seed) override { inner_.init(seed); }
  torch::nn::Module& module() override { return inner_.module(); }
  dew::objectives::Loss loss(const dew::data::Batch& batch, std::int64_t step) override {
    auto loss = inner_.loss(batch, step);
    if (step == bad_step_) loss.sum = loss.sum * std::nan("");
    return loss;
  }
  dew::objectives::Statistics evaluate(const dew::data::Batch& batch) override { return inner_.evaluate(batch); }
  nlohmann::ordered_json config_json() const override { return inner_.config_json(); }

 private:
  LMObjective& inner_;
  std::int64_t bad_step_;
};

// An objective that reports a metric of its own and names no validation loss: the trainer prints and plots
// what the objective reports, not a list of LM names.
class ReportsWidgets final : public dew::objectives::Objective {
 public:
  explicit ReportsWidgets(LMObjective& inner) : inner_(inner) {}
  std::string name() const override { return "widgets"; }
  void init(std::uint64_t seed) override { inner_.init(seed); }
  torch::nn::Module& module() override { return inner_.module(); }
  dew::objectives::Loss loss(const dew::data::Batch& batch, std::int64_t step) override {
    auto loss = inner_.loss(batch, step);
    loss.metrics.add("widgets", 42.0 * loss.count, loss.count);
    return loss;
  }
  dew::objectives::Statistics evaluate(const dew::data::Batch& batch) override {
    auto stats = inner_.evaluate(batch);
    stats.add("widgets", 7.0, 1.0);
    return stats;
  }
  nlohmann::ordered_json config_json() const override { return inner_.config_json(); }
  std::string validation_loss() const override { return ""; }

 private:
  LMObjective& inner_;
};

TEST(Trainer, PrintsAndPlotsWhatTheObjectiveReports) {
  dew::test::SingleThreaded threads;
  TempDir data, run;
  dew::test::write_tiny_tokens(data.path());
  auto inner = tiny_objective();
  ReportsWidgets objective(inner);
  auto config = small_run(4);
  config.log_every = 2;
  config.eval_every = 4;
  auto source = windows(data.path(), dew::data::Split::train);
  auto val = windows(data.path(), dew::data::Split::val);
  Trainer trainer(objective, small_optim(), config, run.path());
  std::FILE* out = std::tmpfile();
  trainer.set_output(out);
  trainer.fit(source, &val);
  std::rewind(out);
  std::string printed;
  for (int c; (c = std::fgetc(out)) != EOF;) printed += static_cast<char>(c);
  std::fclose(out);
  EXPECT_NE(printed.find("training widgets"), std::string::npos) << printed;
  EXPECT_NE(printed.find("step 2/4  loss "), std::string::npos) << printed;
  EXPECT_NE(printed.find("  widgets 42  "), std::string::npos) << printed;
  EXPECT_NE(printed.find("val/widgets 7"), std::string::npos) << printed;
  EXPECT_LT(printed.find("  widgets 42"), printed.find("  lr "));  // the objective's metrics before the trainer's
  for (const char* png : {"loss.png", "val_widgets.png", "val_ce.png", "val_perplexity.png"}) {
    EXPECT_TRUE(fs::exists(run.path() / "tracking" / png)) << png;
  }
}

TEST(Trainer, NonFiniteLossStopsNamingTheStepAndKeepsTheLastGoodCheckpoint) {
  dew::test::SingleThreaded threads;
  TempDir data, run;
  dew::test::write_tiny_tokens(data.path());
  auto inner = tiny_objective();
  NanAtStep objective(inner, 4);  // the fifth update
  auto config = small_run(10);
  config.checkpoint_every = 2;
  auto source = windows(data.path(), dew::data::Split::train);
  Trainer trainer(objective, small_optim(), config, run.path());
  trainer.set_output(nullptr);
  auto message = error_of([&] { trainer.fit(source); });
  EXPECT_NE(message.find("non-finite loss"), std::string::npos) << message;
  EXPECT_NE(message.find("step 5"), std::string::npos) << message;
  EXPECT_NE(message.find((run.path() / "4").string()), std::string::npos) << message;
  EXPECT_EQ(checkpoint_steps(run.path()), (std::vector<std::int64_t>{2, 4}));
  Checkpoint last(run.path() / "4");
  for (const auto& name : last.params().names()) EXPECT_TRUE(at::isfinite(last.params().whole(name)).all().item<bool>()) << name;
}

TEST(Trainer, SigtermFinishesTheStepWritesACheckpointAndReturns) {
  dew::test::SingleThreaded threads;
  TempDir data, run;
  dew::test::write_tiny_tokens(data.path());
  auto objective = tiny_objective();
  auto source = windows(data.path(), dew::data::Split::train);
  auto config = small_run(10);
  config.checkpoint_every = 0;
  Trainer trainer(objective, small_optim(), config, run.path());
  trainer.set_output(nullptr);
  trainer.set_step_callback([](std::int64_t step, const std::map<std::string, double>&) {
    if (step == 2) sigterm_to_the_interrupt_watcher();
  });
  auto result = trainer.fit(source);
  EXPECT_TRUE(result.interrupted);
  EXPECT_EQ(result.step, 2);
  EXPECT_EQ(result.checkpoint, run.path() / "2");
  EXPECT_EQ(checkpoint_steps(run.path()), (std::vector<std::int64_t>{2}));
  EXPECT_EQ(Checkpoint(run.path() / "2").state().data_position, 2 * 4);
  struct sigaction now {};
  sigaction(SIGTERM, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);  // the previous disposition is back
  sigset_t blocked;
  pthread_sigmask(SIG_BLOCK, nullptr, &blocked);
  EXPECT_FALSE(sigismember(&blocked, SIGTERM));  // and the signal reaches this thread again: the watcher ended

  auto finished = train(data.path(), run.path(), small_run(4));
  EXPECT_FALSE(finished.interrupted);
  EXPECT_EQ(finished.step, 4);
}

TEST(Trainer, CorruptOrIncompleteCheckpointIsRefusedByPath) {
  dew::test::SingleThreaded threads;
  TempDir data, run;
  dew::test::write_tiny_tokens(data.path());
  train(data.path(), run.path(), small_run(3));
  const auto params = run.path() / "3" / "params.safetensors";
  auto bytes = dew::read_file(params);
  dew::test::write_text(params, bytes.substr(0, bytes.size() / 2));  // truncated
  const auto scalars_before = dew::read_file(run.path() / "tracking" / "scalars.jsonl");
  auto message = error_of([&] { train(data.path(), run.path(), small_run(6)); });
  EXPECT_NE(message.find(params.string()), std::string::npos) << message;
  EXPECT_EQ(checkpoint_steps(run.path()), (std::vector<std::int64_t>{3}));  // nothing written
  EXPECT_EQ(dew::read_file(run.path() / "tracking" / "scalars.jsonl"), scalars_before);
  EXPECT_EQ(dew::read_file(params).size(), bytes.size() / 2);

  dew::test::write_text(params, bytes);
  fs::remove(run.path() / "3" / "state.json");
  message = error_of([&] { train(data.path(), run.path(), small_run(6)); });
  EXPECT_NE(message.find((run.path() / "3" / "state.json").string()), std::string::npos) << message;

  dew::test::write_text(run.path() / "3" / "state.json", "{\"step\": 3}");
  message = error_of([&] { train(data.path(), run.path(), small_run(6)); });
  EXPECT_NE(message.find("data_position"), std::string::npos) << message;
}

TEST(Trainer, KeepsTheNewestCheckpointsAndIgnoresPartialOnes) {
  dew::test::SingleThreaded threads;
  TempDir data, run;
  dew::test::write_tiny_tokens(data.path());
  auto config = small_run(5);
  config.checkpoint_every = 1;
  config.keep_checkpoints = 2;
  train(data.path(), run.path(), config);
  EXPECT_EQ(checkpoint_steps(run.path()), (std::vector<std::int64_t>{4, 5}));
  fs::create_directories(run.path() / ".9.partial-123-0");  // a crashed write
  fs::create_directories(run.path() / "notes");
  EXPECT_EQ(latest_checkpoint(run.path()), run.path() / "5");
}

TEST(Trainer, LogsScalarsValidatesOverTheWholeSplitAndDrawsPlots) {
  dew::test::SingleThreaded threads;
  TempDir data, run;
  dew::test::write_tiny_tokens(data.path());
  auto config = small_run(5);
  config.log_every = 2;
  config.eval_every = 4;
  config.ema_decay = 0;
  auto objective = tiny_objective();
  auto result = train(data.path(), run.path(), config, small_optim(), &objective);

  auto records = dew::telemetry::read_scalars(run.path() / "tracking" / "scalars.jsonl");
  ASSERT_EQ(records.size(), 3u);  // steps 2, 4 (log + eval), 5 (the end: log + eval)
  EXPECT_EQ(records[0].step, 2);
  EXPECT_EQ(records[1].step, 4);
  EXPECT_EQ(records[2].step, 5);
  for (const char* name : {"loss", "ce", "perplexity", "token_accuracy", "lr", "grad_norm", "step_seconds", "tokens_per_second", "mfu"}) {
    EXPECT_TRUE(records[0].scalars.count(name)) << name;
  }
  EXPECT_FALSE(records[0].scalars.count("val/ce"));
  EXPECT_TRUE(records[1].scalars.count("val/ce"));
  const auto& last = records[2].scalars;
  EXPECT_NEAR(last.at("val/perplexity"), std::exp(last.at("val/ce")), 1e-9);
  EXPECT_NEAR(last.at("loss"), last.at("ce"), 1e-6);

  // Validation covers every val window once: 300 tokens, seq_len 8 -> 37 windows, batches of 4 + a short one.
  auto val = windows(data.path(), dew::data::Split::val);
  ASSERT_EQ(val.records(), 37);
  at::NoGradGuard no_grad;
  auto whole = objective.evaluate(val.next_batch(37));
  EXPECT_NEAR(last.at("val/ce"), whole.mean("ce"), 1e-5);
  EXPECT_NEAR(result.validation.at("ce"), whole.mean("ce"), 1e-5);

  // One plot per validation metric the objective reports, the loss beside its validation counterpart.
  EXPECT_FALSE(fs::exists(run.path() / "tracking" / "val_ce.png"));  // val/ce is in loss.png
  for (const char* png : {"loss.png", "val_perplexity.png", "val_token_accuracy.png"}) {
    auto bytes = dew::read_file(run.path() / "tracking" / png);
    ASSERT_GT(bytes.size(), 24u) << png;
    EXPECT_EQ(bytes.substr(1, 3), "PNG");
    EXPECT_EQ(static_cast<unsigned char>(bytes[18]) * 256 + static_cast<unsigned char>(bytes[19]), 800);  // IHDR width
    EXPECT_EQ(static_cast<unsigned char>(bytes[22]) * 256 + static_cast<unsigned char>(bytes[23]), 500);  // IHDR height
  }
}

TEST(Trainer, LossFallsOnLearnableData) {
  dew::test::SingleThreaded threads;
  TempDir data, run;
  std::vector<dew::data::TokenId> ids;  // next id = previous + 7 (mod 64): fully predictable from one token
  for (int i = 0; i < 4000; ++i) ids.push_back((i * 7) % 64);
  dew::test::write_token_dir(data.path(), ids, {ids.begin(), ids.begin() + 300}, 64);
  auto config = small_run(40);
  config.batch_size = 8;
  config.checkpoint_every = 0;
  OptimConfig optim{.name = "adamw", .learning_rate = 1e-2, .schedule = "constant"};
  train(data.path(), run.path(), config, optim);
  auto loss = dew::telemetry::scalar_series(dew::telemetry::read_scalars(run.path() / "tracking" / "scalars.jsonl"), "loss");
  ASSERT_EQ(loss.size(), 40u);
  EXPECT_NEAR(loss.front().second, std::log(64.0), 0.3);  // starts near uniform
  EXPECT_LT(loss.back().second, 1.0) << "loss " << loss.front().second << " -> " << loss.back().second;
}

TEST(Trainer, RefusesBadSettingsByField) {
  dew::test::SingleThreaded threads;
  auto objective = tiny_objective();
  auto config = small_run(4);
  config.grad_accum = 3;
  auto message = error_of([&] { Trainer(objective, small_optim(), config, "unused"); });
  EXPECT_NE(message.find("trainer.grad_accum"), std::string::npos) << message;
  config = small_run(4);
  config.device = "tpu";
  EXPECT_NE(error_of([&] { Trainer(objective, small_optim(), config, "unused"); }).find("trainer.device"), std::string::npos);

  TempDir data, run;  // a checkpoint with an EMA copy does not restore into a run without one
  dew::test::write_tiny_tokens(data.path());
  train(data.path(), run.path(), small_run(3));
  config = small_run(6);
  config.ema_decay = 0;
  message = error_of([&] { train(data.path(), run.path(), config); });
  EXPECT_NE(message.find("ema_decay"), std::string::npos) << message;
}

TEST(Trainer, LoadsCheckpointWeightsForEvaluation) {
  dew::test::SingleThreaded threads;
  TempDir data, run;
  dew::test::write_tiny_tokens(data.path());
  auto trained = tiny_objective();
  train(data.path(), run.path(), small_run(3), small_optim(), &trained);
  auto live = tiny_objective(), averaged = tiny_objective();
  EXPECT_EQ(load_checkpoint_weights(live.module(), run.path(), /*use_ema=*/false), run.path() / "3");
  load_checkpoint_weights(averaged.module(), run.path() / "3", /*use_ema=*/true);
  for (const auto& [name, p] : dew::nn::parameter_map(trained.module())) {
    EXPECT_TRUE(at::equal(p, dew::nn::parameter_map(live.module()).at(name))) << name;
  }
  auto ema = dew::formats::SafetensorsFile(run.path() / "3" / "ema.safetensors");
  auto name = ema.names().front();
  EXPECT_TRUE(at::equal(dew::nn::parameter_map(averaged.module()).at(name), ema.load(name)));
  EXPECT_FALSE(at::equal(ema.load(name), dew::nn::parameter_map(live.module()).at(name)));
}

TEST(Trainer, Bf16ComputeKeepsFp32MasterWeightsOnCpu) {
  dew::test::SingleThreaded threads;
  TempDir data, run;
  dew::test::write_tiny_tokens(data.path());
  auto model_config = dew::test::tiny_decoder_config();
  model_config.dtype = "bfloat16";
  LMObjective objective(dew::nn::CausalTransformer(model_config), {.seq_len = kSeqLen});
  auto result = train(data.path(), run.path(), small_run(3), small_optim(), &objective);
  EXPECT_EQ(result.step, 3);
  EXPECT_TRUE(std::isfinite(result.metrics.at("loss")));
  for (const auto& [name, p] : dew::nn::parameter_map(objective.module())) EXPECT_EQ(p.scalar_type(), at::kFloat) << name;
  Checkpoint c(run.path() / "3");
  for (const auto& name : c.optimizer().names()) {
    if (name != "step") {
      EXPECT_EQ(c.optimizer().whole(name).scalar_type(), at::kFloat) << name;
    }
  }
  EXPECT_EQ(c.ema().whole(c.ema().names().front()).scalar_type(), at::kFloat);
}

TEST(Trainer, RunsOnCudaWithBf16Compute) {
  dew::test::SingleThreaded threads;
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  TempDir data, run;
  dew::test::write_tiny_tokens(data.path());
  auto model_config = dew::test::tiny_decoder_config();
  model_config.dtype = "bfloat16";
  LMObjective objective(dew::nn::CausalTransformer(model_config), {.seq_len = kSeqLen});
  auto source = windows(data.path(), dew::data::Split::train);
  auto val = windows(data.path(), dew::data::Split::val);
  auto config = small_run(6);
  config.device = "cuda";
  Trainer trainer(objective, small_optim(), config, run.path());
  trainer.set_output(nullptr);
  auto result = trainer.fit(source, &val);
  EXPECT_EQ(result.step, 6);
  for (const auto& [name, p] : dew::nn::parameter_map(objective.module())) {
    EXPECT_TRUE(p.is_cuda()) << name;
    EXPECT_EQ(p.scalar_type(), at::kFloat) << name;  // fp32 master weights
  }
  EXPECT_TRUE(std::isfinite(result.validation.at("ce")));
  EXPECT_LT(result.validation.at("ce"), std::log(64.0) + 0.5);
  Checkpoint c(run.path() / "6");
  EXPECT_EQ(c.params().whole(c.params().names().front()).scalar_type(), at::kFloat);
}

}  // namespace
