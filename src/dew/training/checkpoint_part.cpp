#include "dew/training/checkpoint_part.h"

#include <cstdio>
#include <set>

#include "dew/core/config.h"
#include "dew/core/error.h"

namespace fs = std::filesystem;

namespace dew::training {
namespace {

constexpr const char* kFormat = "dew sharded checkpoint";
constexpr std::int64_t kVersion = 1;

// A scalar is one row.
std::int64_t row_count(const std::vector<std::int64_t>& shape) { return shape.empty() ? 1 : shape[0]; }

// The shape a file stores for rows [first, last): the whole shape with last - first rows.
std::vector<std::int64_t> stored_shape(const std::vector<std::int64_t>& shape, std::int64_t first, std::int64_t last) {
  std::vector<std::int64_t> out = shape.empty() ? std::vector<std::int64_t>{1} : shape;
  out[0] = last - first;
  return out;
}

formats::SafetensorsFile open_shard(const fs::path& file, const fs::path& manifest) {
  if (!fs::is_regular_file(file)) {
    fail("checkpoint file '", file.string(), "' that '", manifest.string(), "' lists is missing; the checkpoint is incomplete");
  }
  try {
    return formats::SafetensorsFile(file);
  } catch (const Error& e) {
    fail("checkpoint file '", file.string(), "' is corrupt: ", e.what());
  }
}

}  // namespace

std::string shard_file_name(const std::string& part, std::int64_t rank, std::int64_t world) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, ".rank%05lld-of-%05lld.safetensors", static_cast<long long>(rank),
                static_cast<long long>(world));
  return part + buffer;
}

CheckpointPart::CheckpointPart(formats::SafetensorsFile file) : source_(file.path().string()) {
  files_.push_back(std::move(file));
}

CheckpointPart::CheckpointPart(const fs::path& manifest, const std::vector<std::string>& files,
                               std::map<std::string, ShardedTensorLayout> layout)
    : sharded_(true), layout_(std::move(layout)) {
  source_ = dew::str(manifest.string(), " (", files.empty() ? std::string("no files") : files.front(),
                     files.size() > 1 ? dew::str(" and ", files.size() - 1, " more") : std::string(), ")");
  for (const auto& name : files) files_.push_back(open_shard(manifest.parent_path() / name, manifest));
  for (const auto& [name, l] : layout_) {
    if (l.ranges.size() != files_.size()) {
      fail("'", manifest.string(), "' tensor '", name, "' has ", l.ranges.size(), " row ranges for ", files_.size(),
           " files; the manifest is damaged");
    }
    std::int64_t next = 0;
    std::string dtype;
    for (std::size_t r = 0; r < files_.size(); ++r) {
      const auto [first, last] = l.ranges[r];
      // Ranges follow each other in rank order and cover the rows exactly: the whole is their concatenation.
      if (first != next || last < first || last > row_count(l.shape)) {
        fail("'", manifest.string(), "' tensor '", name, "' rank ", r, " holds rows [", first, ", ", last,
             ") but the ranks before end at row ", next, " of ", row_count(l.shape), "; the manifest is damaged");
      }
      next = last;
      const auto& file = files_[r];
      if (first == last) {
        if (file.contains(name)) {
          fail("'", file.path().string(), "' holds tensor '", name, "', which '", manifest.string(),
               "' says it has no rows of; the checkpoint is damaged");
        }
        continue;
      }
      if (!file.contains(name)) {
        fail("'", file.path().string(), "' lacks tensor '", name, "' (rows ", first, " to ", last, " per '",
             manifest.string(), "'); the checkpoint is damaged");
      }
      const auto& entry = file.entry(name);
      if (entry.shape != stored_shape(l.shape, first, last)) {
        fail("'", file.path().string(), "' tensor '", name, "' has shape ", c10::IntArrayRef(entry.shape), " but '",
             manifest.string(), "' says ", last - first, " rows of ", c10::IntArrayRef(l.shape));
      }
      if (!dtype.empty() && entry.dtype != dtype) {
        fail("'", file.path().string(), "' tensor '", name, "' is ", entry.dtype, " where the other files hold ", dtype,
             "; the checkpoint is damaged");
      }
      dtype = entry.dtype;
    }
    if (next != row_count(l.shape)) {
      fail("'", manifest.string(), "' tensor '", name, "' ranges end at row ", next, " of ", row_count(l.shape),
           "; the manifest is damaged");
    }
  }
  for (const auto& file : files_) {
    for (const auto& name : file.names()) {
      if (!layout_.count(name)) {
        fail("'", file.path().string(), "' holds tensor '", name, "', which '", manifest.string(), "' does not list");
      }
    }
  }
}

std::vector<std::string> CheckpointPart::names() const {
  if (!sharded()) return files_.front().names();
  std::vector<std::string> out;
  for (const auto& [name, l] : layout_) out.push_back(name);
  return out;
}

bool CheckpointPart::contains(const std::string& name) const {
  return sharded() ? layout_.count(name) > 0 : files_.front().contains(name);
}

std::vector<std::int64_t> CheckpointPart::shape(const std::string& name) const {
  if (!sharded()) return files_.front().entry(name).shape;
  auto it = layout_.find(name);
  if (it == layout_.end()) fail("'", source_, "' has no tensor '", name, "'");
  return it->second.shape;
}

at::Tensor CheckpointPart::whole(const std::string& name) const {
  if (!sharded()) return files_.front().view(name);
  const auto s = shape(name);
  return rows(name, 0, row_count(s)).reshape(s);
}

at::Tensor CheckpointPart::rows(const std::string& name, std::int64_t first, std::int64_t last) const {
  if (!sharded()) {
    at::Tensor t = files_.front().view(name);
    if (t.dim() == 0) t = t.reshape({1});
    return t.narrow(0, first, last - first);
  }
  auto it = layout_.find(name);
  if (it == layout_.end()) fail("'", source_, "' has no tensor '", name, "'");
  std::vector<at::Tensor> pieces;
  for (std::size_t r = 0; r < files_.size(); ++r) {
    const auto [begin, end] = it->second.ranges[r];
    const std::int64_t from = std::max(first, begin), to = std::min(last, end);
    if (to > from) pieces.push_back(files_[r].view(name).narrow(0, from - begin, to - from));
  }
  if (pieces.empty()) {  // zero rows asked for: an empty tensor of the right shape and dtype
    const auto& l = it->second;
    std::size_t r = 0;
    while (l.ranges[r].first == l.ranges[r].second) ++r;  // a tensor has at least one row somewhere
    return files_[r].view(name).narrow(0, 0, 0);
  }
  return pieces.size() == 1 ? pieces.front().clone() : at::cat(pieces, 0);
}

std::map<std::string, at::Tensor> CheckpointPart::all() const {
  std::map<std::string, at::Tensor> out;
  for (const auto& name : names()) out[name] = whole(name);
  return out;
}

nlohmann::ordered_json shard_manifest(std::int64_t world,
                                      const std::map<std::string, std::map<std::string, ShardedTensorLayout>>& parts) {
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["world"] = world;
  j["parts"] = nlohmann::ordered_json::object();
  for (const auto& [part, tensors] : parts) {
    auto& p = j["parts"][part];
    p["files"] = nlohmann::ordered_json::array();
    for (std::int64_t r = 0; r < world; ++r) p["files"].push_back(shard_file_name(part, r, world));
    p["tensors"] = nlohmann::ordered_json::object();
    for (const auto& [name, l] : tensors) {
      auto& t = p["tensors"][name];
      t["shape"] = l.shape;
      t["rows"] = nlohmann::ordered_json::array();
      for (const auto& [first, last] : l.ranges) t["rows"].push_back({first, last});
    }
  }
  return j;
}

std::map<std::string, CheckpointPart> open_sharded_parts(const fs::path& dir) {
  const fs::path file = dir / kShardManifest;
  const auto j = config::parse_json_file(file);
  auto bad = [&](const std::string& field, const std::string& why) -> void {
    fail("'", file.string(), "' field '", field, "' ", why, "; the manifest is damaged");
  };
  if (!j.is_object()) bad("(root)", "must be an object");
  if (!j.contains("format") || j["format"] != kFormat) bad("format", dew::str("must be \"", kFormat, "\""));
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<std::int64_t>() != kVersion) {
    bad("version", dew::str("must be ", kVersion, " (a newer dew wrote it? then read it with that dew)"));
  }
  if (!j.contains("world") || !j["world"].is_number_integer() || j["world"].get<std::int64_t>() < 1) {
    bad("world", "must be a positive integer");
  }
  const std::int64_t world = j["world"].get<std::int64_t>();
  if (!j.contains("parts") || !j["parts"].is_object()) bad("parts", "must be an object");
  std::map<std::string, CheckpointPart> out;
  for (auto it = j["parts"].begin(); it != j["parts"].end(); ++it) {
    const std::string part = it.key();
    const auto& p = it.value();
    const std::string at = "parts." + part;
    if (!p.is_object() || !p.contains("files") || !p["files"].is_array() || !p.contains("tensors") || !p["tensors"].is_object()) {
      bad(at, "must be an object with 'files' (an array) and 'tensors' (an object)");
    }
    std::vector<std::string> files;
    for (const auto& f : p["files"]) {
      // Only the names dew writes: a manifest never points outside its own directory.
      if (!f.is_string() || f.get<std::string>() != shard_file_name(part, static_cast<std::int64_t>(files.size()), world)) {
        bad(at + ".files", dew::str("entry ", files.size(), " must be \"",
                                     shard_file_name(part, static_cast<std::int64_t>(files.size()), world), "\", got ", f.dump()));
      }
      files.push_back(f.get<std::string>());
    }
    if (static_cast<std::int64_t>(files.size()) != world) bad(at + ".files", dew::str("must list ", world, " files (world)"));
    std::map<std::string, ShardedTensorLayout> layout;
    for (auto t = p["tensors"].begin(); t != p["tensors"].end(); ++t) {
      const std::string field = at + ".tensors." + t.key();
      const auto& v = t.value();
      if (!v.is_object() || !v.contains("shape") || !v["shape"].is_array() || !v.contains("rows") || !v["rows"].is_array()) {
        bad(field, "must be an object with 'shape' and 'rows' arrays");
      }
      ShardedTensorLayout l;
      for (const auto& d : v["shape"]) {
        if (!d.is_number_integer() || d.get<std::int64_t>() < 0) bad(field + ".shape", "must hold non-negative integers");
        l.shape.push_back(d.get<std::int64_t>());
      }
      for (const auto& r : v["rows"]) {
        if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() || !r[1].is_number_integer()) {
          bad(field + ".rows", "must hold [first, last] pairs of integers");
        }
        l.ranges.emplace_back(r[0].get<std::int64_t>(), r[1].get<std::int64_t>());
      }
      layout[t.key()] = std::move(l);
    }
    out.emplace(part, CheckpointPart(file, files, std::move(layout)));
  }
  return out;
}

}  // namespace dew::training
