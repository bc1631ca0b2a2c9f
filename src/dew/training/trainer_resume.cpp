// Trainer: opening the run's latest checkpoint and restoring everything a resumed fit() continues from
// (weights, optimizer, EMA, the objective's own state, the CPU generator, the data position, counters).
#include <ATen/ATen.h>

#include <algorithm>

#include "dew/core/error.h"
#include "dew/nn/parameters.h"
#include "dew/training/generator_state.h"
#include "dew/training/trainer.h"

namespace fs = std::filesystem;

namespace dew::training {

std::optional<Checkpoint> Trainer::open_latest_checkpoint() const {
  std::optional<Checkpoint> checkpoint;
  if (auto latest = latest_checkpoint(run_dir_)) checkpoint.emplace(*latest);
  if (checkpoint && checkpoint->has_ema() != (config_.ema_decay > 0)) {
    fail("checkpoint '", checkpoint->dir().string(), "' was written ", checkpoint->has_ema() ? "with" : "without",
         " an EMA copy but this run has trainer.ema_decay = ", config_.ema_decay,
         "; a checkpoint does not restore into the other setting");
  }
  return checkpoint;
}

std::int64_t Trainer::restore(const Checkpoint& checkpoint, data::BatchSource& train, std::map<std::string, double>* last_metrics) {
  restore_weights(checkpoint);
  restore_objective_state(checkpoint);
  return restore_position(checkpoint, train, last_metrics);
}

void Trainer::restore_weights(const Checkpoint& checkpoint) {
  if (sharded_) {  // this rank's rows, from however many processes wrote the checkpoint
    const auto source = checkpoint.params().source();
    const auto rows = sharded_->rows(checkpoint.params());
    at::NoGradGuard no_grad;
    for (const auto& [name, shard] : params_) {
      auto it = rows.find(name);
      if (it == rows.end()) fail("'", source, "' has no tensor '", name, "'; the checkpoint is damaged");
      shard.copy_(it->second);
    }
    optimizer_->load_state(sharded_->rows(checkpoint.optimizer()), checkpoint.optimizer().source());
    if (ema_->enabled()) ema_->load_state(sharded_->rows(checkpoint.ema()), checkpoint.ema().source());
    return;
  }
  nn::load_parameters(objective_.module(), checkpoint.params().all(), checkpoint.params().source());
  optimizer_->load_state(checkpoint.optimizer().all(), checkpoint.optimizer().source());
  if (ema_->enabled()) ema_->load_state(checkpoint.ema().all(), checkpoint.ema().source());
}

void Trainer::restore_objective_state(const Checkpoint& checkpoint) {
  // Copies, not views of the mapped file: the objective keeps them past this checkpoint's lifetime.
  std::map<std::string, at::Tensor> objective_state;
  if (const auto& file = checkpoint.objective_state()) {
    for (const auto& [name, t] : Checkpoint::tensors(*file)) objective_state[name] = t.clone();
  }
  if (group_ && !objective_state.empty()) {
    // Such state is each process's own (GRPO's rollouts of its prompts) and only rank 0's was saved.
    fail("checkpoint '", checkpoint.dir().string(), "' holds the objective's state between steps (", objective_.name(),
         "), which a multi-process run cannot restore on every process; resume from a checkpoint "
         "without it (for GRPO, a step that is a multiple of grpo.epochs) or with one process");
  }
  objective_.load_state(objective_state);
}

std::int64_t Trainer::restore_position(const Checkpoint& checkpoint, data::BatchSource& train,
                                       std::map<std::string, double>* last_metrics) {
  const auto& s = checkpoint.state();
  const std::string state_file = (checkpoint.dir() / "state.json").string();
  if (!s.rng_state.empty()) restore_cpu_generator_state(s.rng_state, state_file);
  // The position counts rows read: S steps of at most B rows end at or before S * B, B the largest
  // trainer.batch_size of any segment so far (positions beyond one epoch are fine, the loader wraps them
  // into later epochs). A larger value was never written by a trainer: the file was damaged or edited.
  // Checkpoints from before largest_batch_size was kept are bounded by this segment's batch size.
  largest_batch_size_ = std::max(s.largest_batch_size, config_.batch_size);
  const std::int64_t bound_batch = s.largest_batch_size > 0 ? largest_batch_size_ : config_.batch_size;
  if (static_cast<double>(s.data_position) > static_cast<double>(s.step) * static_cast<double>(bound_batch)) {
    fail("'", state_file, "' has data_position ", s.data_position, ", more rows than ", s.step, " steps of at most ",
         bound_batch, " rows can have read; the checkpoint is damaged or was edited",
         s.largest_batch_size > 0
             ? std::string("; resume from another checkpoint")
             : std::string(". If the run was trained with a larger trainer.batch_size, resume it with that batch size"));
  }
  train.set_position(s.data_position);
  elapsed_base_ = s.elapsed_seconds;
  tokens_seen_ = s.tokens_seen;
  *last_metrics = s.metrics;
  return s.step;
}

}  // namespace dew::training
