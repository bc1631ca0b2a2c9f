#pragma once
// Names of dtypes in configs ("float32", "bfloat16", "float16") <-> ATen scalar types.
#include <c10/core/ScalarType.h>

#include <string>

namespace dew::nn {

c10::ScalarType parse_dtype(const std::string& name);  // error names the value and the choices
std::string dtype_name(c10::ScalarType type);

}  // namespace dew::nn
