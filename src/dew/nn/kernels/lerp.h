#pragma once
// a += w (b - a) over n floats, with ATen's lerp formula (nn/multi_tensor.h's lerp_each runs it over a list
// of tensors).
#include <cstdint>

namespace dew::nn::kernels {

void lerp(float* a, const float* b, std::int64_t n, float w);

}  // namespace dew::nn::kernels
