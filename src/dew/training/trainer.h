#pragma once
// The Trainer: one training loop for every Objective. It owns the optimizer, schedule, clipping, EMA,
// gradient accumulation, device placement, checkpoints, evaluation cadence, logging and preemption.
//
//   dew::training::Trainer trainer(objective, optim, trainer_config, run_dir);
//   auto result = trainer.fit(train_windows, &val_windows);
//
// fit() resumes from run_dir's latest checkpoint when there is one (parameters, optimizer, EMA, data
// position, RNG, step, clocks) and trains up to trainer_config.steps; otherwise it calls
// objective.init(seed). Each step backpropagates every micro-batch's Loss.sum and divides the gradients by
// the total count, so grad_accum micro-batches equal one batch of all their rows. Then: clip, learning rate
// from the schedule, optimizer step, EMA update.
//
// Writes, under run_dir: one checkpoint directory per checkpointed step (see checkpoint.h; the newest
// keep_checkpoints are kept), tracking/scalars.jsonl (see local_tracker.h: "loss", the objective's
// metrics, "lr", "grad_norm", "step_seconds", "tokens_per_second" (or the objective's count unit, e.g. "images_per_second"), "mfu", and "val/<metric>" at
// evaluations; tokens are the loss terms, Loss.count, i.e. the scored targets of an LM; mfu uses
// trainer.flops_per_token, see flops.h for a decoder's), and, when fit returns, tracking/loss.png and tracking/val_perplexity.png. It does not
// write run.json: that is the caller's (it knows the model and data).
//
// Data parallel (several processes started by `dew launch`, trainer.parallel = ddp): every rank runs this
// loop on its shard of each batch (the loaders take the rank and world), starting from rank 0's weights;
// gradients are summed over the ranks in buckets during backward (distributed/gradient_buckets.h) and the
// loss sums, counts and metrics after it, so every rank divides by the global count and takes the same
// step one process would take with the whole batch. Evaluation is summed the same way. Only rank 0 prints,
// logs, plots and writes checkpoints; a stop signal on any rank stops all of them at the same step. With
// trainer.parallel = fsdp the same, but the parameters, gradients, optimizer state and EMA are sharded over
// the ranks and each layer gathered for its call (sharded_training.h).
//
// A non-finite loss or gradient norm stops the run with a dew::Error naming the step, without writing a
// checkpoint of that state (the last good one stays). SIGINT/SIGTERM during fit finish the current step,
// write a checkpoint and return with interrupted = true.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <c10/core/Device.h>

#include "dew/data/batch_source.h"
#include "dew/distributed/gradient_buckets.h"
#include "dew/distributed/process_group.h"
#include "dew/objectives/objective.h"
#include "dew/training/checkpoint.h"
#include "dew/training/ema.h"
#include "dew/training/optim_config.h"
#include "dew/training/optimizer.h"
#include "dew/training/sharded_training.h"
#include "dew/training/trainer_config.h"

namespace dew {
class GracefulStop;
}  // namespace dew

namespace dew::training {

struct FitResult {
  std::int64_t step = 0;          // the step the run stopped at (== steps unless interrupted)
  bool interrupted = false;       // stopped by SIGINT/SIGTERM
  std::map<std::string, double> metrics;     // the last logged training scalars
  std::map<std::string, double> validation;  // the last evaluation ("ce", "perplexity", ...), if any
  std::filesystem::path checkpoint;          // the newest checkpoint directory
};

class Trainer {
 public:
  Trainer(objectives::Objective& objective, OptimConfig optim, TrainerConfig config, std::filesystem::path run_dir);
  ~Trainer();

  FitResult fit(data::BatchSource& train, data::BatchSource* val = nullptr);

  // Validation statistics over `val` (trainer.eval_batches batches, 0 = all) with the EMA weights when
  // the run keeps them; usable after fit().
  objectives::Statistics evaluate(data::BatchSource& val);

  // Where progress and log lines go (default stdout); nullptr = silent. A progress bar is drawn only
  // when the stream is a terminal.
  void set_output(std::FILE* out) { out_ = out; }
  // Called after every completed step with that step's scalars (before logging and checkpointing).
  using StepCallback = std::function<void(std::int64_t step, const std::map<std::string, double>& scalars)>;
  void set_step_callback(StepCallback callback) { on_step_ = std::move(callback); }
  // Called after every evaluation with that step, while the module holds the weights evaluation used (the
  // EMA copy when the run keeps one): a diffusion run draws its preview grid here.
  using EvalCallback = std::function<void(std::int64_t step)>;
  void set_eval_callback(EvalCallback callback) { on_eval_ = std::move(callback); }

  // A fresh run (no checkpoint in run_dir) normally starts with objective.init(seed); after this call it
  // trains the parameters the module holds now instead (pretrained weights, fine-tuning).
  void use_current_parameters() { init_on_fresh_run_ = false; }

  // Bytes this process holds of the trained weights, their optimizer state and EMA (with fsdp, its shards;
  // gradients and the weights gathered for a call come and go). Known once fit() has begun.
  std::int64_t resident_state_bytes() const;

  c10::Device device() const { return device_; }
  const TrainerConfig& config() const { return config_; }
  const OptimConfig& optim() const { return optim_; }

 private:
  // fit() in the order it runs them, each a screen or less: open the checkpoint, place the parameters,
  // restore, announce, train the steps (each logged and checkpointed on its cadence), finish.
  struct StepOutcome;
  struct FitSession;
  std::optional<Checkpoint> open_latest_checkpoint() const;  // validated before anything changes
  std::int64_t place_parameters(bool fresh);                  // returns the count of trained parameters
  void share_leader_weights();
  double peak_flops();
  std::int64_t restore(const Checkpoint& checkpoint, data::BatchSource& train, std::map<std::string, double>* last_metrics);
  void restore_weights(const Checkpoint& checkpoint);
  void restore_objective_state(const Checkpoint& checkpoint);
  std::int64_t restore_position(const Checkpoint& checkpoint, data::BatchSource& train, std::map<std::string, double>* last_metrics);
  std::string start_line(std::int64_t step, std::int64_t parameter_count, const FitSession& session) const;
  std::int64_t train_steps(FitSession& session, data::BatchSource& train, data::BatchSource* val, std::int64_t step, FitResult& result);
  StepOutcome run_step(FitSession& session, data::BatchSource& train, std::int64_t step);  // traced when trainer.trace_step says
  StepOutcome train_step(data::BatchSource& train, std::int64_t step, const GracefulStop& stop);
  void report_start_up(FitSession& session, const StepOutcome& first);
  void log_window(FitSession& session, std::int64_t step, const StepOutcome& last, data::BatchSource* val, FitResult& result);
  void checkpoint_step(std::int64_t step, std::int64_t data_position, FitResult& result);
  std::filesystem::path write_checkpoint(std::int64_t step, std::int64_t data_position,
                                         const std::map<std::string, double>& metrics);
  void finish(FitSession& session, FitResult& result);

  objectives::Objective& objective_;
  OptimConfig optim_;
  TrainerConfig config_;
  std::filesystem::path run_dir_;
  c10::Device device_;
  std::FILE* out_ = stdout;
  StepCallback on_step_;
  EvalCallback on_eval_;
  bool init_on_fresh_run_ = true;
  std::map<std::string, at::Tensor> params_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<Ema> ema_;
  double elapsed_base_ = 0, tokens_seen_ = 0;
  std::int64_t largest_batch_size_ = 0;
  distributed::ProcessGroup* group_ = nullptr;  // set with several processes
  std::unique_ptr<distributed::GradientBuckets> buckets_;  // ddp
  std::unique_ptr<ShardedTraining> sharded_;               // fsdp
  bool leader() const { return !group_ || group_->rank() == 0; }  // CheckpointState::largest_batch_size, this segment's included
  std::chrono::steady_clock::time_point segment_start_;
};

}  // namespace dew::training
