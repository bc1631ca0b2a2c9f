#include "dew/interop/hf_weights.h"

#include "dew/core/config.h"
#include "dew/core/error.h"

namespace dew::interop {

namespace fs = std::filesystem;

HfWeights::HfWeights(const fs::path& dir) : dir_(dir) {
  auto single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
  // As transformers does, model.safetensors wins when both it and an index are present.
  if (fs::exists(single)) {
    auto file = std::make_shared<formats::SafetensorsFile>(single);
    files_["model.safetensors"] = file;
    for (const auto& name : file->names()) file_of_[name] = "model.safetensors";
  } else if (fs::exists(index)) {
    auto j = config::parse_json_file(index);
    if (!j.contains("weight_map") || !j["weight_map"].is_object()) {
      dew::fail("'", index.string(), "' has no weight_map object; it should map each tensor name to its shard file");
    }
    for (const auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string()) dew::fail("'", index.string(), "': weight_map[\"", name, "\"] is ", file.dump(), ", not a file name");
      auto file_name = file.get<std::string>();
      if (file_name.find('/') != std::string::npos || file_name == "..") {
        dew::fail("'", index.string(), "': weight_map[\"", name, "\"] names '", file_name, "', outside the directory");
      }
      if (!files_.count(file_name)) files_[file_name] = std::make_shared<formats::SafetensorsFile>(dir / file_name);
      if (!files_[file_name]->contains(name)) {
        dew::fail("'", (dir / file_name).string(), "' lacks tensor '", name, "', which '", index.string(), "' places there");
      }
      file_of_[name] = file_name;
    }
  } else {
    dew::fail("'", dir.string(), "' has neither model.safetensors nor model.safetensors.index.json");
  }
}

std::vector<std::string> HfWeights::names() const {
  std::vector<std::string> out;
  for (const auto& [name, file] : file_of_) out.push_back(name);
  return out;
}

std::string HfWeights::file_of(const std::string& name) const {
  auto it = file_of_.find(name);
  return (dir_ / (it == file_of_.end() ? "model.safetensors" : it->second)).string();
}

const formats::SafetensorsEntry& HfWeights::entry(const std::string& name) const {
  auto it = file_of_.find(name);
  if (it == file_of_.end()) dew::fail("'", dir_.string(), "' has no tensor '", name, "'");
  return files_.at(it->second)->entry(name);
}

at::Tensor HfWeights::view(const std::string& name) const {
  auto it = file_of_.find(name);
  if (it == file_of_.end()) dew::fail("'", dir_.string(), "' has no tensor '", name, "'");
  return files_.at(it->second)->view(name);
}

}  // namespace dew::interop
