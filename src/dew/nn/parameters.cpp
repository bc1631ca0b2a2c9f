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
  at::NoGradGuard no_grad;
  auto params = parameter_map(module);
  for (auto& [name, p] : params) {
    if (!file.contains(name)) {
      if (!p.requires_grad()) continue;  // frozen (a LoRA run's base): its checkpoints hold only what trains
      dew::fail("'", file.path().string(), "' lacks tensor '", name, "' that the model needs");
    }
    const auto& entry = file.entry(name);
    if (c10::IntArrayRef(entry.shape) != p.sizes()) {
      dew::fail("'", file.path().string(), "' tensor '", name, "' has shape ", c10::IntArrayRef(entry.shape),
                " but the model expects ", p.sizes());
    }
    const at::Tensor stored = file.view(name);
    require_finite(stored, file.path().string(), name);
    p.copy_(stored);
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
