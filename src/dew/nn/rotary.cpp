#include "dew/nn/rotary.h"

#include <cmath>

namespace dew::nn {

at::Tensor rotary_inv_freq(std::int64_t head_dim, double theta, const RopeScaling& scaling, c10::Device device) {
  auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  // 1 / theta^(arange(0, d, 2) / d), in fp32, as transformers computes it.
  auto exponents =
      at::arange(0, head_dim, 2, at::TensorOptions().dtype(at::kLong).device(device)).to(at::kFloat) / static_cast<double>(head_dim);
  auto inv_freq = 1.0 / at::pow(at::scalar_tensor(theta, f32), exponents);
  if (scaling.type == "linear") return inv_freq / scaling.factor;
  if (scaling.type == "llama3") {
    // transformers' _compute_llama3_parameters, step for step (fp32 tensors, Python-float constants).
    double old_context = static_cast<double>(scaling.original_max_position_embeddings);
    double low_freq_wavelen = old_context / scaling.low_freq_factor, high_freq_wavelen = old_context / scaling.high_freq_factor;
    auto wavelen = 2 * M_PI / inv_freq;
    auto scaled = at::where(wavelen > low_freq_wavelen, inv_freq / scaling.factor, inv_freq);
    auto smooth = (old_context / wavelen - scaling.low_freq_factor) / (scaling.high_freq_factor - scaling.low_freq_factor);
    auto smoothed = (1 - smooth) * scaled / scaling.factor + smooth * scaled;
    auto medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen);
    return at::where(medium, smoothed, scaled);
  }
  return inv_freq;
}

RotaryAngles rotary_angles(const at::Tensor& positions, const at::Tensor& inv_freq, c10::ScalarType dtype) {
  auto freqs = positions.to(at::kFloat).unsqueeze(-1) * inv_freq;  // [B, S, D/2]
  auto emb = at::cat({freqs, freqs}, -1).unsqueeze(1);             // [B, 1, S, D]
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

RotaryAngles rotary_angles(const at::Tensor& positions, std::int64_t head_dim, double theta, c10::ScalarType dtype) {
  return rotary_angles(positions, rotary_inv_freq(head_dim, theta, RopeScaling{}, positions.device()), dtype);
}

at::Tensor apply_rotary(const at::Tensor& x, const RotaryAngles& angles) {
  auto half = x.size(-1) / 2;
  auto rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * angles.cos + rotated * angles.sin;
}

}  // namespace dew::nn
