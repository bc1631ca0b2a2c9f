#pragma once
// One kind of tensors in a checkpoint (params, optimizer, ema), however it was written: one safetensors
// file, or, for a run trained with trainer.parallel = fsdp, one file per process holding that process's
// rows of each tensor, with the manifest (shards.json) saying which rows of the whole each file holds:
//
//   RUN_DIR/20/shards.json                              written by rank 0: world, files, shapes, row ranges
//   RUN_DIR/20/params.rank00000-of-00002.safetensors    rank 0's rows of every parameter
//   RUN_DIR/20/params.rank00001-of-00002.safetensors    rank 1's
//   RUN_DIR/20/optimizer.rank0000R-of-00002.safetensors, ema.rank0000R-of-00002.safetensors likewise
//
// Readers see whole tensors either way, so a sharded run resumes with any number of processes (each
// reads only the rows it will hold), and `dew eval`, `generate` and `export` read it as any run. Tensors
// are cut along dim 0 (a scalar is one row); a file holds a tensor only where its range is non-empty.
#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/formats/safetensors.h"

namespace dew::training {

// Where one tensor's rows lie: its whole shape, and per file (rank) the rows [first, last) it holds.
struct ShardedTensorLayout {
  std::vector<std::int64_t> shape;
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
};

class CheckpointPart {
 public:
  explicit CheckpointPart(formats::SafetensorsFile file);
  // Opens `files` (names relative to the manifest's directory) and checks each against `layout`: every
  // non-empty range present with its shape, one dtype per tensor, no tensor the manifest does not list.
  // Errors name the manifest, the file and the tensor.
  CheckpointPart(const std::filesystem::path& manifest, const std::vector<std::string>& files,
                 std::map<std::string, ShardedTensorLayout> layout);

  // What errors name: the file, or the manifest and the part's files.
  const std::string& source() const { return source_; }
  bool sharded() const { return sharded_; }
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  std::vector<std::int64_t> shape(const std::string& name) const;
  // The whole tensor: a view of the mapped file, or (sharded) a CPU copy assembled from the files.
  at::Tensor whole(const std::string& name) const;
  // Rows [first, last) of the whole (a scalar is one row), reading only the files that hold them.
  at::Tensor rows(const std::string& name, std::int64_t first, std::int64_t last) const;
  // Every tensor, whole.
  std::map<std::string, at::Tensor> all() const;

 private:
  std::string source_;
  bool sharded_ = false;
  std::vector<formats::SafetensorsFile> files_;  // one, unless sharded
  std::map<std::string, ShardedTensorLayout> layout_;
};

// The manifest's name in a checkpoint directory, and the shard file of a part for a rank.
inline constexpr const char* kShardManifest = "shards.json";
std::string shard_file_name(const std::string& part, std::int64_t rank, std::int64_t world);

// shards.json: {"format": "dew sharded checkpoint", "version": 1, "world": N,
//               "parts": {"params": {"files": [...], "tensors": {NAME: {"shape": [...], "rows": [[a, b], ...]}}}}}
nlohmann::ordered_json shard_manifest(std::int64_t world,
                                      const std::map<std::string, std::map<std::string, ShardedTensorLayout>>& parts);
// Parses and checks the manifest in `dir`, opening its parts (name -> part). Errors name the file and field.
std::map<std::string, CheckpointPart> open_sharded_parts(const std::filesystem::path& dir);

}  // namespace dew::training
