#include "dew/nn/parameters.h"

#include "dew/core/error.h"

namespace dew::nn {

std::map<std::string, at::Tensor> parameter_map(const torch::nn::Module& module) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : module.named_parameters()) out.emplace(item.key(), item.value());
  return out;
}

void load_parameters(torch::nn::Module& module, const formats::SafetensorsFile& file, bool strict) {
  at::NoGradGuard no_grad;
  auto params = parameter_map(module);
  for (auto& [name, p] : params) {
    if (!file.contains(name)) dew::fail("'", file.path().string(), "' lacks tensor '", name, "' that the model needs");
    const auto& entry = file.entry(name);
    if (c10::IntArrayRef(entry.shape) != p.sizes()) {
      dew::fail("'", file.path().string(), "' tensor '", name, "' has shape ", c10::IntArrayRef(entry.shape),
                " but the model expects ", p.sizes());
    }
    p.copy_(file.view(name));
  }
  if (strict) {
    for (const auto& name : file.names()) {
      if (!params.count(name)) dew::fail("'", file.path().string(), "' has tensor '", name, "', which the model does not have");
    }
  }
}

void save_parameters(const torch::nn::Module& module, const std::filesystem::path& path,
                     const std::map<std::string, std::string>& metadata) {
  formats::save_safetensors(path, parameter_map(module), metadata);
}

}  // namespace dew::nn
