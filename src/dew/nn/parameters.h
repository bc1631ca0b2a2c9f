#pragma once
// Moving a module's parameters in and out of named tensor files (checkpoints, fixtures, exports).
#include <torch/nn/module.h>

#include <map>
#include <string>

#include "dew/formats/safetensors.h"

namespace dew::nn {

std::map<std::string, at::Tensor> parameter_map(const torch::nn::Module& module);

// Copies every parameter from `file` (converting dtype, keeping each parameter's device and dtype).
// A frozen parameter (requires_grad false: a LoRA run's base weights) may be absent and then keeps its
// value, since checkpoints hold only what trains. A trainable parameter missing from the file, a shape that disagrees, a NaN or infinity in it (require_finite), or
// (when strict) a tensor in the file that the module lacks, is an error naming the file and the tensor.
void load_parameters(torch::nn::Module& module, const formats::SafetensorsFile& file, bool strict = true);
// The same from named tensors (a sharded checkpoint assembled whole); `source` names them in errors.
void load_parameters(torch::nn::Module& module, const std::map<std::string, at::Tensor>& tensors, const std::string& source,
                     bool strict = true);

// Refuses a tensor with a NaN or an infinity, naming `file`, the tensor and the first such element: weights
// like that evaluate to ce nan and generate only EOS, with nothing else pointing at the file. One
// isfinite().all() per tensor, a small fraction of reading it.
void require_finite(const at::Tensor& tensor, const std::string& file, const std::string& name);

void save_parameters(const torch::nn::Module& module, const std::filesystem::path& path,
                     const std::map<std::string, std::string>& metadata = {});

}  // namespace dew::nn
