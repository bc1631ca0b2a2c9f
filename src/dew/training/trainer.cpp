#include "dew/training/trainer.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdio>
#include <optional>

#include "dew/core/error.h"
#include "dew/core/interrupt.h"
#include "dew/core/process_clock.h"
#include "dew/core/progress.h"
#include "dew/nn/device.h"
#include "dew/telemetry/local_tracker.h"
#include "dew/training/evaluate.h"
#include "dew/training/grad_clip.h"
#include "dew/training/lr_schedule.h"
#include "dew/training/process_statistics.h"
#include "dew/training/step_log.h"
#include "dew/training/step_trace.h"
#include "dew/training/training_plots.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace dew::training {
namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

struct Trainer::StepOutcome {
  double loss_sum = 0, count = 0, grad_norm = 0, lr = 0, seconds = 0;
  objectives::Statistics metrics;
  bool stop = false;  // with several processes: some rank was asked to stop (summed with the step)
};

Trainer::Trainer(objectives::Objective& objective, OptimConfig optim, TrainerConfig config, fs::path run_dir)
    : objective_(objective), optim_(std::move(optim)), config_(std::move(config)), run_dir_(std::move(run_dir)),
      device_(c10::kCPU) {
  optim_.validate();
  config_.validate();
  device_ = nn::resolve_device(config_.device);
  if (distributed::process_place().multi_process()) {
    group_ = &distributed::join_process_group(
        device_, std::chrono::milliseconds(static_cast<std::int64_t>(config_.timeout_seconds * 1000)));
  }
}

Trainer::~Trainer() = default;

// What one fit() call carries from its start to its end: where it speaks, the stop signals, the
// progress bar, the tracker, the MFU terms, and the sums of the current log window.
struct Trainer::FitSession {
  std::FILE* out = nullptr;  // the leader's stream; nullptr on the other ranks: one voice for the whole job
  // SIGINT/SIGTERM finish the step and write a checkpoint; a second one quits at once.
  GracefulStop stop{"dew: second interrupt, quitting without a checkpoint"};
  std::optional<Progress> progress;  // made once the start step is known
  std::optional<telemetry::LocalTracker> tracker;
  double flops_per_token = 0, peak = 0;
  std::int64_t world = 1;
  // The log window: sums over the steps since the last log line.
  double loss = 0, count = 0, seconds = 0;
  std::int64_t steps = 0;
  objectives::Statistics metrics;

  void say(const std::string& text) {
    if (progress) {
      progress->line(text);
    } else if (out) {
      std::fprintf(out, "%s\n", text.c_str());
      std::fflush(out);
    }
  }
  void add_to_window(const StepOutcome& outcome) {
    loss += outcome.loss_sum, count += outcome.count, seconds += outcome.seconds;
    metrics.merge(outcome.metrics);
    ++steps;
  }
  void clear_window() {
    loss = count = seconds = 0;
    steps = 0;
    metrics = {};
  }
};

FitResult Trainer::fit(data::BatchSource& train, data::BatchSource* val) {
  FitSession session;
  session.out = leader() ? out_ : nullptr;
  // Open (and so validate) the checkpoint before anything changes.
  const std::optional<Checkpoint> checkpoint = open_latest_checkpoint();
  const std::int64_t parameter_count = place_parameters(!checkpoint);
  elapsed_base_ = 0;
  tokens_seen_ = 0;
  largest_batch_size_ = config_.batch_size;
  FitResult result;
  std::int64_t step = 0;
  if (checkpoint) {
    step = restore(*checkpoint, train, &result.metrics);
    session.say(dew::str("resuming from '", checkpoint->dir().string(), "' at step ", step));
  }
  if (leader()) session.tracker.emplace(run_dir_ / "tracking", step);
  session.flops_per_token = config_.flops_per_token > 0 ? config_.flops_per_token : 6.0 * static_cast<double>(parameter_count);
  session.peak = peak_flops();
  session.world = group_ ? group_->world() : 1;
  session.say(start_line(step, parameter_count, session));
  // The bar (on a terminal) between the log lines, which are the record elsewhere; timed from here, after
  // the peak measurement, so its ETA counts training steps only.
  session.progress.emplace("train", static_cast<std::uint64_t>(config_.steps), "",
                           ProgressOptions{.out = session.out, .lines_when_not_terminal = false, .start = static_cast<std::uint64_t>(step)});
  segment_start_ = Clock::now();
  result.step = train_steps(session, train, val, step, result);
  finish(session, result);
  return result;
}

std::string Trainer::start_line(std::int64_t step, std::int64_t parameter_count, const FitSession& session) const {
  const std::int64_t world = session.world;
  return dew::str("training ", objective_.name(), ": ", human_count(static_cast<double>(parameter_count), "parameters"), " on ",
                  device_.str(), ", steps ", step, " -> ", config_.steps, ", batch ", config_.batch_size,
                  config_.grad_accum > 1 ? dew::str(" (", config_.grad_accum, " micro-batches)") : std::string(),
                  world > 1 ? dew::str(" over ", world, " processes (", sharded_ ? "sharded" : "data parallel", ")") : std::string(),
                  ", peak ", human_count(session.peak, "FLOP/s"), world > 1 ? " each" : "", ", weights and optimizer state ",
                  human_count(static_cast<double>(resident_state_bytes()), "B"), world > 1 ? " per process" : "");
}

std::int64_t Trainer::train_steps(FitSession& session, data::BatchSource& train, data::BatchSource* val, std::int64_t step,
                                  FitResult& result) {
  bool stopping = false;  // agreed by every rank: they stop at the same step
  const std::int64_t first_step = step + 1;
  while (step < config_.steps && !stopping) {
    const StepOutcome outcome = run_step(session, train, step);
    ++step;
    if (step == first_step) report_start_up(session, outcome);
    tokens_seen_ += outcome.count;
    session.add_to_window(outcome);
    if (on_step_) {
      std::map<std::string, double> now = outcome.metrics.summary();
      now["loss"] = outcome.loss_sum / outcome.count;
      now["lr"] = outcome.lr;
      now["grad_norm"] = outcome.grad_norm;
      on_step_(step, now);
    }
    session.progress->set(static_cast<std::uint64_t>(step), dew::str("loss ", format_value("loss", outcome.loss_sum / outcome.count)));
    // One process stops on its own signal; several on a request any of them had at the step's sum.
    stopping = group_ ? outcome.stop : session.stop.requested();

    const bool last = step == config_.steps;
    const bool eval_due = val && ((config_.eval_every > 0 && step % config_.eval_every == 0) || last);
    if (step % config_.log_every == 0 || last || eval_due || stopping) {
      log_window(session, step, outcome, eval_due ? val : nullptr, result);
    }
    if ((config_.checkpoint_every > 0 && step % config_.checkpoint_every == 0) || last || stopping) {
      checkpoint_step(step, train.position(), result);
    }
  }
  result.interrupted = stopping;
  return step;
}

Trainer::StepOutcome Trainer::run_step(FitSession& session, data::BatchSource& train, std::int64_t step) {
  if (step + 1 != config_.trace_step) return train_step(train, step, session.stop);
  StepOutcome outcome;
  const auto& place = distributed::process_place();
  const auto path = step_trace_path(run_dir_, step + 1, place.rank, place.world);
  run_traced(path, [&] { outcome = train_step(train, step, session.stop); });
  session.say(dew::str("step ", step + 1, "'s ops traced to '", path.string(), "' (LibTorch's profiler; the step is slower for it)"));
  return outcome;
}

void Trainer::report_start_up(FitSession& session, const StepOutcome& first) {
  // Start-up cost, as a user waits for it: process start (loader, LibTorch) to the end of the first step.
  if (auto since_start = seconds_since_process_start()) {
    char line[160];
    std::snprintf(line, sizeof line, "first step done %.2f s after the process started (the step itself %.2f s)", *since_start,
                  first.seconds);
    session.say(line);
  }
}

void Trainer::log_window(FitSession& session, std::int64_t step, const StepOutcome& last, data::BatchSource* val,
                         FitResult& result) {
  std::map<std::string, double> scalars = session.metrics.summary();
  scalars["loss"] = session.loss / session.count;
  scalars["lr"] = last.lr;
  scalars["grad_norm"] = last.grad_norm;
  scalars["step_seconds"] = session.seconds / static_cast<double>(session.steps);
  scalars[objective_.count_unit() + "_per_second"] = session.count / session.seconds;
  if (objective_.fixed_flops_per_count()) {
    scalars["mfu"] = session.flops_per_token * (session.count / session.seconds) / (session.peak * static_cast<double>(session.world));
  }
  if (val) {
    auto summary = evaluate(*val).summary();
    result.validation = summary;
    for (const auto& [name, v] : summary) scalars["val/" + name] = v;
    if (on_eval_ && leader()) {
      auto& module = objective_.module();
      EmaScope scope(ema_.get());
      at::NoGradGuard no_grad;
      module.eval();
      on_eval_(step);
      module.train();
    }
  }
  if (session.tracker) session.tracker->log(step, scalars);
  session.say(log_line(step, config_.steps, scalars));
  result.metrics = scalars;
  session.clear_window();
}

void Trainer::finish(FitSession& session, FitResult& result) {
  if (result.interrupted) {
    session.say(dew::str("stopped by signal ", session.stop.signal(), " after step ", result.step, "; checkpoint '",
                         result.checkpoint.string(), "'. Run again to resume."));
  }
  if (result.checkpoint.empty()) {
    if (auto latest = latest_checkpoint(run_dir_)) result.checkpoint = *latest;
  }
  if (leader()) draw_training_plots(run_dir_ / "tracking", objective_.validation_loss());
  if (group_) group_->barrier("the end of training");
  sharded_.reset();  // the module holds its whole weights again
}

Trainer::StepOutcome Trainer::train_step(data::BatchSource& train, std::int64_t step, const GracefulStop& stop) {
  const auto start = Clock::now();
  StepOutcome out;
  std::vector<at::Tensor> params;
  for (auto& [name, p] : params_) {
    if (!buckets_) p.mutable_grad() = at::Tensor();
    params.push_back(p);
  }
  if (buckets_) buckets_->zero_gradients();
  if (sharded_) sharded_->gather_root(dew::str("the root's weights at step ", step + 1));
  const std::int64_t rows = config_.process_rows();
  at::Tensor loss_total;
  for (std::int64_t micro = 0; micro < config_.grad_accum; ++micro) {
    auto loss = objective_.loss(to_device(train.next_batch(rows), device_), step);
    if (buckets_ && micro + 1 == config_.grad_accum) buckets_->arm(dew::str("the gradient sum of step ", step + 1));
    loss.sum.backward();
    if (sharded_) sharded_->reduce_root_gradients(dew::str("the root's gradients at step ", step + 1));
    loss_total = loss_total.defined() ? loss_total + loss.sum.detach() : loss.sum.detach();
    out.count += loss.count;
    out.metrics.merge(loss.metrics);
  }
  if (sharded_) sharded_->release_root();
  out.loss_sum = loss_total.item<double>();
  if (group_) {
    const bool stop_requested = stop.requested();
    if (buckets_) buckets_->finish();
    // One small sum for the step's loss, count, stop requests and metrics: every rank then sees the same.
    objectives::Statistics local = out.metrics;
    local.add("\x01step", out.loss_sum, out.count);
    local.add("\x01stop", stop_requested ? 1 : 0, 0);
    auto total = sum_over_processes(local, *group_, dew::str("the loss sum of step ", step + 1));
    const auto& values = total.values();
    out.loss_sum = values.at("\x01step").sum;
    out.count = values.at("\x01step").count;
    out.stop = values.at("\x01stop").sum > 0;
    out.metrics = {};
    for (const auto& [name, v] : values) {
      if (name[0] != '\x01') out.metrics.add(name, v.sum, v.count);
    }
  }
  if (!std::isfinite(out.loss_sum)) {
    auto last = latest_checkpoint(run_dir_);
    fail("non-finite loss (", out.loss_sum, ") at step ", step + 1, "; training stopped without saving this state. ",
         last ? dew::str("The last good checkpoint is '", last->string(), "'.") : std::string("No checkpoint was written yet."),
         " Lower optim.learning_rate or check the data.");
  }
  if (out.count <= 0) fail("step ", step + 1, ": the batch has no loss terms (count 0); is every target masked out?");
  // The gradients hold sums over the step's count (tokens, images, pairs): the mean's gradient is theirs
  // divided by it. That division and the clipping are one factor the optimizer applies in its own pass.
  const GradientScale scale =
      sharded_ ? gradient_scale(params, optim_.grad_clip_norm, 1.0 / out.count, [this](double s) { return sharded_->sum_over_processes(s); })
               : gradient_scale(params, optim_.grad_clip_norm, 1.0 / out.count);
  out.grad_norm = scale.norm;
  if (!std::isfinite(out.grad_norm)) {
    auto last = latest_checkpoint(run_dir_);
    fail("non-finite gradient norm at step ", step + 1, " (loss ", out.loss_sum / out.count,
         "); training stopped without saving this state. ",
         last ? dew::str("The last good checkpoint is '", last->string(), "'.") : std::string("No checkpoint was written yet."));
  }
  out.lr = learning_rate_at(optim_, step, optim_.schedule_steps(config_.steps));
  optimizer_->step(out.lr, scale.factor);
  ema_->update(step);
  objective_.after_step(step, config_.steps);
  out.seconds = seconds_since(start);
  return out;
}

objectives::Statistics Trainer::evaluate(data::BatchSource& val) {
  EmaScope scope(ema_.get());
  if (!sharded_) return evaluate_objective(objective_, val, config_.batch_size, config_.eval_batches, device_, group_);
  sharded_->gather_root("the root's weights for evaluation");
  auto statistics = evaluate_objective(objective_, val, config_.batch_size, config_.eval_batches, device_, group_);
  sharded_->release_root();
  return statistics;
}

}  // namespace dew::training
