#include "dew/training/sharded_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"

namespace fs = std::filesystem;

namespace dew::training {
namespace {

constexpr std::int64_t kPathBytes = 4096;  // PATH_MAX: the temporary directory's path, sent as bytes

// Rank 0's temporary directory, told to every rank (one broadcast): the others write into it.
fs::path shared_path(distributed::ProcessGroup& group, const fs::path& mine, const std::string& what) {
  at::Tensor bytes = at::zeros({kPathBytes}, at::kByte);
  if (group.rank() == 0) {
    const std::string s = mine.string();
    if (static_cast<std::int64_t>(s.size()) >= kPathBytes) fail("the run directory path is too long (", s.size(), " bytes): ", s);
    std::memcpy(bytes.data_ptr(), s.data(), s.size());
  }
  std::vector<at::Tensor> tensors{bytes};
  group.broadcast(tensors, 0, what);
  const char* p = static_cast<const char*>(tensors[0].data_ptr());
  return fs::path(std::string(p, strnlen(p, kPathBytes)));
}

}  // namespace

fs::path save_sharded_checkpoint(distributed::ProcessGroup& group, const fs::path& run_dir, const CheckpointState& state,
                                 const ShardedParts& parts, const std::map<std::string, at::Tensor>& objective) {
  const std::string what = dew::str("the checkpoint of step ", state.step);
  const bool leader = group.rank() == 0;
  std::optional<AtomicDirectory> dir;
  if (leader) {
    fs::create_directories(run_dir);
    remove_stale_temporaries(run_dir);  // what a writer killed mid-save left (see save_checkpoint)
    dir.emplace(run_dir / std::to_string(state.step));
  }
  const fs::path temporary = shared_path(group, leader ? dir->path() : fs::path(), what);
  if (!fs::is_directory(temporary)) {
    fail("rank ", group.rank(), " cannot see '", temporary.string(), "', where rank 0 is writing ", what,
         ": every process must see the run directory (put it on a filesystem all hosts share)");
  }
  for (const auto& [part, tensors] : parts) {
    std::map<std::string, at::Tensor> mine;
    for (const auto& [name, s] : tensors) {
      if (s.rows.defined() && s.rows.numel() > 0 && s.rows.size(0) > 0) mine[name] = s.rows;
    }
    formats::save_safetensors(temporary / shard_file_name(part, group.rank(), group.world()), mine);
  }
  group.barrier(dew::str("the shards of ", what));
  if (leader) {
    std::map<std::string, std::map<std::string, ShardedTensorLayout>> layout;
    for (const auto& [part, tensors] : parts) {
      auto& l = layout[part];
      for (const auto& [name, s] : tensors) l[name] = s.layout;
    }
    if (!objective.empty()) formats::save_safetensors(dir->path() / "objective.safetensors", objective);
    write_file_atomic(dir->path() / kShardManifest, shard_manifest(group.world(), layout).dump(1) + "\n");
    write_checkpoint_state(dir->path(), state);
    dir->commit();
  }
  // Nobody goes on (or exits, after the last checkpoint) until the step directory is in place.
  group.barrier(dew::str("the manifest of ", what));
  return leader ? run_dir / std::to_string(state.step) : fs::path();
}

}  // namespace dew::training
