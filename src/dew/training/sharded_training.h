#pragma once
// What the trainer does differently with trainer.parallel = fsdp: the model's trainable parameters are
// sharded over the processes (distributed/sharded_parameters.h), each layer of its stack (nn/layer_stack.h)
// gathered only for its own call and recomputed in backward (distributed/sharded_layer.h), the root (the
// parameters outside the layers: embeddings, final norm, output head) gathered for the length of a step.
// The optimizer, EMA and clipping work on the shards. Each process writes its own rows into the checkpoint
// (training/sharded_checkpoint.h) and reads back the rows it holds from whatever number of processes wrote
// them, so a sharded run resumes with any number of processes, or one, and `dew export` / `dew generate`
// read it as any run (training/checkpoint_part.h assembles the whole tensors).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "dew/distributed/process_group.h"
#include "dew/distributed/sharded_parameters.h"
#include "dew/training/checkpoint_part.h"
#include "dew/training/sharded_checkpoint.h"

namespace dew::training {

class ShardedTraining {
 public:
  // Refuses a model without a layer stack, or with frozen parameters (trainable only is what shards).
  ShardedTraining(distributed::ProcessGroup& group, torch::nn::Module& module);
  ~ShardedTraining();  // the module's tensors hold the whole values again, layers called directly

  // Name -> this rank's shard: what the optimizer, the EMA and clipping see.
  std::map<std::string, at::Tensor> shards() const { return sharded_->shards(); }

  // The root, gathered for a step (or an evaluation); its gradients summed into the shards after each
  // backward; emptied after.
  void gather_root(const std::string& what) { sharded_->gather(root_, what); }
  void reduce_root_gradients(const std::string& what) { sharded_->reduce_gradients(root_, what); }
  void release_root() { sharded_->release(root_); }

  // Checkpoint state keyed "<param>" or "<kind>/<param>" (parameters, EMA, optimizer moments): shard-shaped
  // -> this rank's rows without padding and where every rank's rows lie, for save_sharded_checkpoint.
  // Other keys ("step") are rank 0's alone.
  std::map<std::string, ShardRows> checkpoint_rows(const std::map<std::string, at::Tensor>& shard_state) const;
  // A checkpoint's part (written by any number of processes, or one) -> shard-shaped state for this rank,
  // reading only its rows. Errors name the part's files when a tensor's shape is not the model's.
  std::map<std::string, at::Tensor> rows(const CheckpointPart& part) const;

  // The job's sum of squares of the gradients, from this rank's (for the global norm).
  double sum_over_processes(double local_sum_of_squares);

 private:
  std::optional<std::size_t> entry_of(const std::string& key) const;

  distributed::ProcessGroup& group_;
  torch::nn::Module& module_;
  std::unique_ptr<distributed::ShardedParameters> sharded_;
  std::vector<std::vector<std::size_t>> layers_;  // each layer's entries
  std::vector<std::size_t> root_;
};

}  // namespace dew::training
