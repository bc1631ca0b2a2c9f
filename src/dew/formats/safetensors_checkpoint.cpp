#include "dew/formats/safetensors_checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <regex>
#include <set>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"

namespace dew::formats {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSingle = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";

// A shard name from an index must be a plain file name inside the checkpoint directory.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos;
}

std::string shard_name(std::size_t i, std::size_t n) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "model-%05zu-of-%05zu.safetensors", i, n);
  return buffer;
}

bool is_shard_name(const std::string& name) {
  static const std::regex pattern(R"(model-\d{5}-of-\d{5}\.safetensors)");
  return std::regex_match(name, pattern);
}

}  // namespace

SafetensorsCheckpoint::SafetensorsCheckpoint(const fs::path& path) : path_(path) {
  if (!fs::exists(path)) dew::fail("checkpoint '", path.string(), "' does not exist");
  if (!fs::is_directory(path)) {
    add_file(path);
    return;
  }
  if (fs::exists(path / kSingle)) {
    add_file(path / kSingle);
  } else if (fs::exists(path / kIndex)) {
    open_index(path / kIndex);
  } else {
    dew::fail("'", path.string(), "' holds neither ", kSingle, " nor ", kIndex, " (is it a Hugging Face checkpoint?)");
  }
}

void SafetensorsCheckpoint::add_file(const fs::path& file) {
  files_.push_back(std::make_unique<SafetensorsFile>(file));
  paths_.push_back(file);
  const std::size_t index = files_.size() - 1;
  for (const auto& name : files_.back()->names()) {
    auto [it, inserted] = where_.emplace(name, index);
    if (!inserted) {
      dew::fail("tensor '", name, "' is held by both '", paths_[it->second].string(), "' and '", file.string(),
                "'; a checkpoint must hold each tensor once");
    }
  }
}

void SafetensorsCheckpoint::open_index(const fs::path& index) {
  const auto where = index.string();
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(read_file(index));
  } catch (const nlohmann::json::exception& e) {
    dew::fail("'", where, "' is not valid JSON (", e.what(), ")");
  }
  if (!json.is_object() || !json.contains("weight_map") || !json["weight_map"].is_object()) {
    dew::fail("'", where, "' needs a \"weight_map\" object of tensor name -> shard file");
  }
  // Shards in order of first mention, each opened once.
  std::vector<std::string> shards;
  std::map<std::string, std::string> mapping;
  for (auto it = json["weight_map"].begin(); it != json["weight_map"].end(); ++it) {
    if (!it.value().is_string()) dew::fail("'", where, "': weight_map['", it.key(), "'] must be a file name, got ", it.value().dump());
    const auto shard = it.value().get<std::string>();
    if (!plain_file_name(shard)) {
      dew::fail("'", where, "': weight_map['", it.key(), "'] = '", shard, "' is not a file name inside the checkpoint directory");
    }
    if (std::find(shards.begin(), shards.end(), shard) == shards.end()) {
      if (!fs::is_regular_file(index.parent_path() / shard)) {
        dew::fail("'", where, "' maps tensor '", it.key(), "' to shard '", shard, "', which is missing from '",
                  index.parent_path().string(), "'");
      }
      shards.push_back(shard);
    }
    mapping[it.key()] = shard;
  }
  std::sort(shards.begin(), shards.end());
  for (const auto& shard : shards) add_file(index.parent_path() / shard);
  for (const auto& [name, shard] : mapping) {
    auto it = where_.find(name);
    if (it == where_.end() || paths_[it->second].filename() != shard) {
      dew::fail("'", where, "' maps tensor '", name, "' to '", shard, "', which does not hold it",
                it == where_.end() ? std::string(" (no shard does)") : " (it is in '" + paths_[it->second].string() + "')");
    }
  }
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  for (const auto& f : files_) {
    for (auto& n : f->names()) out.push_back(std::move(n));
  }
  return out;
}

const SafetensorsFile& SafetensorsCheckpoint::file_for(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) dew::fail("checkpoint '", path_.string(), "' has no tensor '", name, "'");
  return *files_[it->second];
}

at::Tensor SafetensorsCheckpoint::view(const std::string& name) const { return file_for(name).view(name); }
const SafetensorsEntry& SafetensorsCheckpoint::entry(const std::string& name) const { return file_for(name).entry(name); }
void SafetensorsCheckpoint::drop_pages(const std::string& name) const { file_for(name).drop_pages(name); }
fs::path SafetensorsCheckpoint::file_of(const std::string& name) const { return file_for(name).path(); }

std::vector<fs::path> write_safetensors_checkpoint(const fs::path& dir, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                                                   std::int64_t max_shard_bytes, const std::map<std::string, std::string>& metadata) {
  if (max_shard_bytes <= 0) dew::fail("max_shard_bytes must be positive, got ", max_shard_bytes);
  std::map<std::string, std::string> meta = metadata;
  meta.emplace("format", "pt");
  // Plan the shards: greedy in the given order; a tensor larger than the limit gets a shard of its own.
  std::vector<std::map<std::string, at::Tensor>> shards(1);
  std::int64_t current = 0, total = 0;
  std::set<std::string> seen;
  for (const auto& [name, tensor] : tensors) {
    if (!seen.insert(name).second) dew::fail("tensor '", name, "' is given twice for '", dir.string(), "'");
    const std::int64_t bytes = tensor.numel() * static_cast<std::int64_t>(tensor.element_size());
    if (!shards.back().empty() && current + bytes > max_shard_bytes) {
      shards.emplace_back();
      current = 0;
    }
    shards.back()[name] = tensor;
    current += bytes;
    total += bytes;
  }
  fs::create_directories(dir);
  std::vector<fs::path> written;
  std::set<std::string> keep;
  if (shards.size() == 1) {
    save_safetensors(dir / kSingle, shards[0], meta);
    written.push_back(dir / kSingle);
    keep.insert(kSingle);
  } else {
    // Same-named shards of an earlier export would be overwritten one by one; remove its index first so an
    // interrupted save is refused loudly rather than read as a mix of old and new shards.
    const auto old_index = dir / kIndex;
    if (fs::exists(old_index) && !fs::exists(dir / kSingle) && fs::exists(dir / shard_name(1, shards.size()))) {
      fs::remove(old_index);
    }
    nlohmann::json weight_map = nlohmann::json::object();
    for (std::size_t i = 0; i < shards.size(); ++i) {
      const auto name = shard_name(i + 1, shards.size());
      save_safetensors(dir / name, shards[i], meta);
      written.push_back(dir / name);
      keep.insert(name);
      for (const auto& [tensor, t] : shards[i]) weight_map[tensor] = name;
    }
    nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file_atomic(dir / kIndex, index.dump(2) + "\n");
    written.push_back(dir / kIndex);
    keep.insert(kIndex);
  }
  // The new export is complete: remove what is left of an earlier one.
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto name = e.path().filename().string();
    if ((name == kSingle || name == kIndex || is_shard_name(name)) && !keep.count(name)) stale.push_back(e.path());
  }
  for (const auto& path : stale) fs::remove(path);
  sync_directory(dir);
  return written;
}

}  // namespace dew::formats
