#pragma once
// Writing a checkpoint of a sharded run (trainer.parallel = fsdp): each process writes its own rows of
// every parameter, optimizer moment and EMA tensor, and rank 0 the manifest, the objective's state and
// state.json, all into one temporary directory that rank 0 renames into place once every process has
// finished: the step directory is whole or absent, as for a one-process run (training/checkpoint.h).
// Every process must see the run directory (one host, or a filesystem the hosts share).
#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <string>

#include "dew/distributed/process_group.h"
#include "dew/training/checkpoint.h"
#include "dew/training/checkpoint_part.h"

namespace dew::training {

// One process's rows of one tensor (empty when its range is), and where every process's rows lie.
struct ShardRows {
  at::Tensor rows;
  ShardedTensorLayout layout;
};
// part (params, optimizer, ema) -> tensor name -> this process's rows.
using ShardedParts = std::map<std::string, std::map<std::string, ShardRows>>;

// A collective: every process calls it with its rows; `objective` is rank 0's (the others' is ignored).
// Returns the step directory on rank 0, an empty path elsewhere. A process that fails (disk full) makes
// the others fail naming it, and the temporary directory is removed.
std::filesystem::path save_sharded_checkpoint(distributed::ProcessGroup& group, const std::filesystem::path& run_dir,
                                              const CheckpointState& state, const ShardedParts& parts,
                                              const std::map<std::string, at::Tensor>& objective);

}  // namespace dew::training
