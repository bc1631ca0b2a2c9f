#pragma once
// The tensors of a Hugging Face checkpoint directory: model.safetensors, or the shards named by
// model.safetensors.index.json's weight_map. Read through memory maps; a tensor's bytes are touched only
// when it is viewed. (A small stand-in for formats::SafetensorsCheckpoint, which will replace it.)
#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dew/formats/safetensors.h"

namespace dew::interop {

class HfWeights {
 public:
  explicit HfWeights(const std::filesystem::path& dir);  // errors name the directory or index

  std::vector<std::string> names() const;  // sorted
  bool has(const std::string& name) const { return file_of_.count(name) > 0; }
  const formats::SafetensorsEntry& entry(const std::string& name) const;
  at::Tensor view(const std::string& name) const;  // CPU, stored dtype
  // The file holding `name`, for error messages.
  std::string file_of(const std::string& name) const;

 private:
  std::filesystem::path dir_;
  std::map<std::string, std::shared_ptr<formats::SafetensorsFile>> files_;  // by file name
  std::map<std::string, std::string> file_of_;                              // tensor -> file name
};

}  // namespace dew::interop
