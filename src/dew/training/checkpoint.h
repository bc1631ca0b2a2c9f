#pragma once
// Checkpoints: a run directory holds one directory per checkpointed step, named by the step number:
//
//   RUN_DIR/20/params.safetensors     the module's parameters (Hugging Face names for decoders)
//   RUN_DIR/20/optimizer.safetensors  optimizer state ("exp_avg/<param>", ..., "step")
//   RUN_DIR/20/ema.safetensors        the EMA copy, when the run keeps one
//   RUN_DIR/20/objective.safetensors  the objective's own state (Objective::state()), when it has any
//   RUN_DIR/20/state.json             step, data position, seed and RNG state, clocks, last metrics
//
// A run trained with trainer.parallel = fsdp writes params, optimizer and ema as one file per process plus
// the manifest shards.json (training/checkpoint_part.h, sharded_checkpoint.h); readers see whole tensors.
//
// A checkpoint is built under a hidden temporary sibling and renamed into place (AtomicDirectory), so a
// step directory is either complete or absent; latest_checkpoint() ignores temporary and partial names.
// Opening one validates every file before anything is loaded, and errors name the file and the tensor.
#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dew/formats/safetensors.h"
#include "dew/training/checkpoint_part.h"

namespace torch::nn {
class Module;
}

namespace dew::training {

// What state.json records besides the tensors.
struct CheckpointState {
  std::int64_t step = 0;
  std::int64_t data_position = 0;  // BatchSource::position() of the training data after this step
  std::uint64_t seed = 0;
  std::string rng_state;           // the CPU generator's state, hex (empty = not saved)
  double elapsed_seconds = 0;      // training wall time so far (summed over resumed segments)
  double tokens_seen = 0;          // loss terms (targets) trained on so far
  // The largest trainer.batch_size of any segment so far (a resumed run may change it), so that a resume
  // can tell a data_position no trainer could have reached; 0 in checkpoints written before it was kept.
  std::int64_t largest_batch_size = 0;
  std::map<std::string, double> metrics;  // the last logged scalars
};

struct CheckpointTensors {
  std::map<std::string, at::Tensor> params, optimizer, ema;  // ema empty when the run keeps none
  std::map<std::string, at::Tensor> objective;  // Objective::state(); empty = no file
};

// Writes RUN_DIR/<step> atomically (replacing an existing directory of that step only once the new one is
// complete) and returns its path.
std::filesystem::path save_checkpoint(const std::filesystem::path& run_dir, const CheckpointState& state,
                                      const CheckpointTensors& tensors);

// Writes DIR/state.json (atomically): what save_checkpoint and the sharded writer record besides tensors.
void write_checkpoint_state(const std::filesystem::path& dir, const CheckpointState& state);

// Steps that have a checkpoint directory (all-digit names), ascending. Missing run_dir = none.
std::vector<std::int64_t> checkpoint_steps(const std::filesystem::path& run_dir);
// The directory of the highest step, if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& run_dir);
// Removes all but the newest `keep` checkpoints (keep <= 0 keeps all).
void prune_checkpoints(const std::filesystem::path& run_dir, std::int64_t keep);

// An opened, validated checkpoint directory: every file present (ema only if it was written), each
// safetensors header valid (and, sharded, each file agreeing with the manifest), state.json complete.
class Checkpoint {
 public:
  // Errors name the file, and the run's older checkpoints that open (with --step N to use one).
  explicit Checkpoint(std::filesystem::path dir);

  const std::filesystem::path& dir() const { return dir_; }
  const CheckpointState& state() const { return state_; }
  bool has_ema() const { return ema_.has_value(); }
  bool sharded() const { return params_.sharded(); }
  const CheckpointPart& params() const { return params_; }
  const CheckpointPart& optimizer() const { return optimizer_; }
  const CheckpointPart& ema() const;  // error if the run kept no EMA
  // The objective's state (objective.safetensors), or nothing when the objective kept none.
  const std::optional<formats::SafetensorsFile>& objective_state() const { return objective_; }
  // All tensors of one file as CPU views.
  static std::map<std::string, at::Tensor> tensors(const formats::SafetensorsFile& file);
  static std::map<std::string, at::Tensor> tensors(const CheckpointPart& part) { return part.all(); }

 private:
  struct Unchecked {};
  Checkpoint(const std::filesystem::path& dir, Unchecked);  // the opening itself, errors without the hint
  static std::string older_checkpoints_hint(const std::filesystem::path& dir);
  // The part `name` (params, optimizer, ema) from the manifest's parts, else its single file; absent when
  // it is optional and was not written.
  std::optional<CheckpointPart> open_part(const std::string& name, bool required) const;

  std::filesystem::path dir_;
  CheckpointState state_;
  std::map<std::string, CheckpointPart> sharded_parts_;  // from shards.json; empty for a one-process run
  CheckpointPart params_, optimizer_;
  std::optional<CheckpointPart> ema_;
  std::optional<formats::SafetensorsFile> objective_;
};

// Loads a checkpoint's weights into `module` for evaluation or generation: the EMA copy when `use_ema` and
// the checkpoint has one, else the live parameters. `checkpoint` is a step directory or a run directory
// (its latest checkpoint). Returns the step directory used.
std::filesystem::path load_checkpoint_weights(torch::nn::Module& module, const std::filesystem::path& checkpoint,
                                              bool use_ema = true);

}  // namespace dew::training
