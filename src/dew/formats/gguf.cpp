#include "dew/formats/gguf.h"

#include <algorithm>

#include "dew/core/error.h"
#include "dew/formats/gguf_quants.h"

namespace dew::formats {

std::vector<std::int64_t> gguf_torch_shape(const GgufTensorInfo& info) {
  return {info.dims.rbegin(), info.dims.rend()};
}

at::Tensor gguf_tensor(const GgufFile& file, const std::string& name, c10::ScalarType dtype) {
  const auto& info = file.tensor(name);
  if (!ggml_type_dequantizable(info.type)) {
    dew::fail("'", file.name(), "' tensor '", name, "' is stored as ", ggml_type_name(info.type),
              ", which dew cannot dequantize (it reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K); "
              "use a GGUF of the model quantized to one of those (llama.cpp's llama-quantize from an F16 or BF16 GGUF) "
              "or the unquantized Hugging Face checkpoint");
  }
  auto out = at::empty(gguf_torch_shape(info), at::TensorOptions().dtype(at::kFloat));
  dequantize(info.type, file.data(info), info.elements(), out.data_ptr<float>());
  return dtype == at::kFloat ? out : out.to(dtype);
}

}  // namespace dew::formats
