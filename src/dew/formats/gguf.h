#pragma once
// GGUF tensors as LibTorch tensors: the torch side of gguf_file.h.
#include <ATen/ATen.h>

#include <string>

#include "dew/formats/gguf_file.h"

namespace dew::formats {

// The tensor `name` dequantized to float32 (gguf_quants.h, over dew::available_threads()) and converted to
// `dtype`, in PyTorch's dimension order (the reverse of GGUF's dims): a GGUF [in, out] matrix becomes
// [out, in]. A new CPU tensor that does not depend on the file staying open. Errors name the file and
// tensor (missing, or a type dew cannot dequantize).
at::Tensor gguf_tensor(const GgufFile& file, const std::string& name, c10::ScalarType dtype = at::kFloat);

// PyTorch's shape of a GGUF tensor.
std::vector<std::int64_t> gguf_torch_shape(const GgufTensorInfo& info);

}  // namespace dew::formats
