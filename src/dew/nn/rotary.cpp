#include "dew/nn/rotary.h"

namespace dew::nn {

RotaryAngles rotary_angles(const at::Tensor& positions, std::int64_t head_dim, double theta, c10::ScalarType dtype) {
  auto f32 = at::TensorOptions().dtype(at::kFloat).device(positions.device());
  // inv_freq exactly as transformers builds it: 1 / theta^(arange(0, d, 2) / d), in fp32.
  auto exponents = at::arange(0, head_dim, 2, at::TensorOptions().dtype(at::kLong).device(positions.device())).to(at::kFloat) /
                   static_cast<double>(head_dim);
  auto inv_freq = 1.0 / at::pow(at::scalar_tensor(theta, f32), exponents);
  auto freqs = positions.to(at::kFloat).unsqueeze(-1) * inv_freq;  // [B, S, D/2]
  auto emb = at::cat({freqs, freqs}, -1).unsqueeze(1);             // [B, 1, S, D]
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

at::Tensor apply_rotary(const at::Tensor& x, const RotaryAngles& angles) {
  auto half = x.size(-1) / 2;
  auto rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * angles.cos + rotated * angles.sin;
}

}  // namespace dew::nn
