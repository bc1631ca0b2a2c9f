#include "dew/nn/dtype.h"

#include "dew/core/error.h"

namespace dew::nn {

c10::ScalarType parse_dtype(const std::string& name) {
  if (name == "float32" || name == "fp32") return c10::kFloat;
  if (name == "bfloat16" || name == "bf16") return c10::kBFloat16;
  if (name == "float16" || name == "fp16") return c10::kHalf;
  dew::fail("dtype '", name, "' is not supported; use float32, bfloat16 or float16");
}

std::string dtype_name(c10::ScalarType type) {
  switch (type) {
    case c10::kFloat: return "float32";
    case c10::kBFloat16: return "bfloat16";
    case c10::kHalf: return "float16";
    default: return c10::toString(type);
  }
}

}  // namespace dew::nn
