#include "dew/nn/parameters.h"

#include <cmath>

#include "dew/core/error.h"

namespace dew::nn {

std::map<std::string, at::Tensor> parameter_map(const torch::nn::Module& module) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : module.named_parameters()) out.emplace(item.key(), item.value());
  return out;
}

void require_finite(const at::Tensor& tensor, const std::string& file, const std::string& name) {
  if (!tensor.is_floating_point() || at::isfinite(tensor).all().item<bool>()) return;
  const at::Tensor flat = tensor.reshape(-1);
  const std::int64_t index = at::logical_not(at::isfinite(flat)).nonzero()[0][0].item<std::int64_t>();
  const double value = flat[index].item<double>();
  dew::fail("'", file, "' tensor '", name, "' holds non-finite values (", std::isnan(value) ? "NaN" : value > 0 ? "inf" : "-inf",
            " at element ", index, "); the weights are damaged (a diverged run saved them, or the file was changed): "
            "use another checkpoint (--step N, or --live for the trained parameters instead of the EMA copy)");
}

void load_parameters(torch::nn::Module& module, const formats::SafetensorsFile& file, bool strict) {
  std::map<std::string, at::Tensor> views;  // memory-mapped: nothing is read until copied
  for (const auto& name : file.names()) views[name] = file.view(name);
  load_parameters(module, views, file.path().string(), strict);
}

void load_parameters(torch::nn::Module& module, const std::map<std::string, at::Tensor>& tensors, const std::string& source,
                     bool strict) {
  at::NoGradGuard no_grad;
  auto params = parameter_map(module);
  for (auto& [name, p] : params) {
    auto it = tensors.find(name);
    if (it == tensors.end()) {
      if (!p.requires_grad()) continue;  // frozen (a LoRA run's base): its checkpoints hold only what trains
      dew::fail("'", source, "' lacks tensor '", name, "' that the model needs");
    }
    const at::Tensor& stored = it->second;
    if (stored.sizes() != p.sizes()) {
      dew::fail("'", source, "' tensor '", name, "' has shape ", stored.sizes(), " but the model expects ", p.sizes());
    }
    require_finite(stored, source, name);
    p.copy_(stored);
  }
  if (strict) {
    for (const auto& [name, t] : tensors) {
      if (!params.count(name)) dew::fail("'", source, "' has tensor '", name, "', which the model does not have");
    }
  }
}

void save_parameters(const torch::nn::Module& module, const std::filesystem::path& path,
                     const std::map<std::string, std::string>& metadata) {
  formats::save_safetensors(path, parameter_map(module), metadata);
}

}  // namespace dew::nn
