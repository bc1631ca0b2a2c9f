#pragma once
// A Hugging Face checkpoint's weights: one .safetensors file, or a directory holding `model.safetensors`
// or `model.safetensors.index.json` plus the shards it names, read as one set of named tensors.
//
// The index is {"metadata": {"total_size": N}, "weight_map": {tensor name: shard file name}}. Shards are
// opened once each and memory-mapped. Refused, naming the files and the tensor: an index naming a missing
// shard (or a path outside the directory), a name mapped to a shard that does not hold it, a tensor held by
// two files. Tensors a shard holds but the index does not list are included (transformers ignores the map
// for them too).
//
// The writer shards like transformers' save_pretrained: one `model.safetensors` when everything fits in
// `max_shard_bytes`, otherwise `model-00001-of-0000N.safetensors`... (tensors kept in the given order, a new
// shard started when the next tensor would overflow the current one) and the index. Shards are written
// first, each atomically, the index last; files of a previous export that the new one does not use
// (`model.safetensors`, other shards, the index) are removed only once the new export is complete. As in
// transformers, a directory holding both model.safetensors and an index reads model.safetensors.
#include <ATen/ATen.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dew/formats/safetensors.h"

namespace dew::formats {

class SafetensorsCheckpoint {
 public:
  explicit SafetensorsCheckpoint(const std::filesystem::path& path);

  std::vector<std::string> names() const;  // shard by shard, each in data order
  bool has(const std::string& name) const { return where_.count(name) > 0; }
  at::Tensor view(const std::string& name) const;  // CPU, stored dtype, viewing the map (kept alive)
  const SafetensorsEntry& entry(const std::string& name) const;
  void drop_pages(const std::string& name) const;  // SafetensorsFile::drop_pages
  std::filesystem::path file_of(const std::string& name) const;
  const std::vector<std::filesystem::path>& files() const { return paths_; }
  // What was opened: the file, or the directory.
  const std::filesystem::path& path() const { return path_; }

 private:
  const SafetensorsFile& file_for(const std::string& name) const;
  void open_index(const std::filesystem::path& index);
  void add_file(const std::filesystem::path& file);
  std::filesystem::path path_;
  std::vector<std::filesystem::path> paths_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::size_t> where_;  // tensor -> index into files_
};

inline constexpr std::int64_t kDefaultMaxShardBytes = 5'000'000'000;  // transformers' "5GB"

// Writes `tensors` (names unique) as described above, with metadata {"format": "pt"} plus `metadata`.
// Creates `dir` when missing. Returns the files written, shards first.
std::vector<std::filesystem::path> write_safetensors_checkpoint(
    const std::filesystem::path& dir, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
    std::int64_t max_shard_bytes = kDefaultMaxShardBytes, const std::map<std::string, std::string>& metadata = {});

}  // namespace dew::formats
