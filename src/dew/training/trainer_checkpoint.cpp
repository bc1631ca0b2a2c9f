// Trainer: writing a step's checkpoint (one process, or each rank's rows of a sharded run) and checkpointing
// when the cadence, the last step or a stop asks for it.
#include <ATen/ATen.h>

#include "dew/core/error.h"
#include "dew/training/generator_state.h"
#include "dew/training/sharded_checkpoint.h"
#include "dew/training/trainer.h"

namespace fs = std::filesystem;

namespace dew::training {

void Trainer::checkpoint_step(std::int64_t step, std::int64_t data_position, FitResult& result) {
  if (leader() || sharded_) result.checkpoint = write_checkpoint(step, data_position, result.metrics);
  if (group_) {
    group_->barrier(dew::str("the checkpoint of step ", step));  // no rank runs ahead of a checkpoint being written
    if (!leader()) result.checkpoint = latest_checkpoint(run_dir_).value_or(fs::path());
  }
}

fs::path Trainer::write_checkpoint(std::int64_t step, std::int64_t data_position, const std::map<std::string, double>& metrics) {
  CheckpointState state;
  state.step = step;
  state.data_position = data_position;
  state.seed = config_.seed;
  state.rng_state = cpu_generator_state_hex();
  state.elapsed_seconds = elapsed_base_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - segment_start_).count();
  state.tokens_seen = tokens_seen_;
  state.largest_batch_size = largest_batch_size_;
  state.metrics = metrics;
  if (sharded_) {  // each rank writes its rows; rank 0 the manifest, the objective and state.json
    ShardedParts parts;
    parts["params"] = sharded_->checkpoint_rows(params_);
    parts["optimizer"] = sharded_->checkpoint_rows(optimizer_->state());
    if (ema_->enabled()) parts["ema"] = sharded_->checkpoint_rows(ema_->state());
    std::map<std::string, at::Tensor> objective;
    if (leader()) {
      for (const auto& [name, t] : objective_.state()) objective[name] = t.detach().to(at::kCPU).contiguous();
    }
    auto dir = save_sharded_checkpoint(*group_, run_dir_, state, parts, objective);
    if (leader()) prune_checkpoints(run_dir_, config_.keep_checkpoints);
    return dir;
  }
  CheckpointTensors tensors;
  tensors.params = params_;  // what trains: frozen weights (a LoRA run's base) come from where the run started
  tensors.optimizer = optimizer_->state();
  if (ema_->enabled()) tensors.ema = ema_->state();
  if (!leader()) return {};
  for (const auto& [name, t] : objective_.state()) tensors.objective[name] = t.detach().to(at::kCPU).contiguous();
  auto dir = save_checkpoint(run_dir_, state, tensors);
  prune_checkpoints(run_dir_, config_.keep_checkpoints);
  return dir;
}

}  // namespace dew::training
