#include "dew/nn/rotary.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "dew/nn/kernels/rotary.h"

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

at::Tensor longrope_inv_freq(std::int64_t head_dim, double theta, const RopeScaling& scaling, bool long_rows, c10::Device device) {
  auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  auto exponents =
      at::arange(0, head_dim, 2, at::TensorOptions().dtype(at::kLong).device(device)).to(at::kFloat) / static_cast<double>(head_dim);
  // torch.tensor(list, dtype=float32): each Python float rounded to float32.
  auto factors = at::tensor(long_rows ? scaling.long_factor : scaling.short_factor, at::kDouble).to(f32);
  return 1.0 / (factors * at::pow(at::scalar_tensor(theta, f32), exponents));
}

RotaryAngles longrope_angles(const at::Tensor& positions, const at::Tensor& lengths, std::int64_t head_dim, double theta,
                             const RopeScaling& scaling, c10::ScalarType dtype) {
  const auto device = positions.device();
  auto is_long = (lengths > scaling.original_max_position_embeddings).view({-1, 1, 1});  // [B, 1, 1]
  auto inv_freq = at::where(is_long, longrope_inv_freq(head_dim, theta, scaling, true, device),
                            longrope_inv_freq(head_dim, theta, scaling, false, device));  // [B, 1, D/2]
  auto freqs = positions.to(at::kFloat).unsqueeze(-1) * inv_freq;                       // [B, S, D/2]
  auto emb = at::cat({freqs, freqs}, -1).unsqueeze(1);                                   // [B, 1, S, D]
  auto cos = emb.cos(), sin = emb.sin();
  if (scaling.attention_factor != 1.0) cos = cos * scaling.attention_factor, sin = sin * scaling.attention_factor;
  return {cos.to(dtype), sin.to(dtype)};
}

RotaryAngles rotary_angles(const at::Tensor& positions, std::int64_t head_dim, double theta, c10::ScalarType dtype) {
  return rotary_angles(positions, rotary_inv_freq(head_dim, theta, RopeScaling{}, positions.device()), dtype);
}

at::Tensor apply_rotary_reference(const at::Tensor& x, const RotaryAngles& angles) {
  auto half = x.size(-1) / 2;
  auto rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * angles.cos + rotated * angles.sin;
}

namespace {

// out[b, n, t, :] = rotate(in[b, n, t, :]) with cos/sin[b or 0, 0, t, :], any strides whose last is 1
// (the angles' batch dimension may be broadcast). `out` is allocated like `in` (a transposed view keeps its
// layout, so q and k stay views of [B, S, heads, D] memory as the unfused path leaves them).
at::Tensor rotate(const at::Tensor& in, const RotaryAngles& angles, bool transpose) {
  const auto src = in.stride(3) == 1 ? in : in.contiguous();
  auto out = at::empty_like(src);
  const auto B = src.size(0), N = src.size(1), T = src.size(2), D = src.size(3);
  const auto cos = angles.cos.expand({B, 1, T, D}), sin = angles.sin.expand({B, 1, T, D});
  const float *xp = src.data_ptr<float>(), *cp = cos.data_ptr<float>(), *sp = sin.data_ptr<float>();
  float* yp = out.data_ptr<float>();
  const std::int64_t xs[3] = {src.stride(0), src.stride(1), src.stride(2)}, ys[3] = {out.stride(0), out.stride(1), out.stride(2)};
  const std::int64_t cs[2] = {cos.stride(0), cos.stride(2)}, ss[2] = {sin.stride(0), sin.stride(2)};
  const std::int64_t grain = std::max<std::int64_t>(1, (1 << 14) / std::max<std::int64_t>(D, 1));
  at::parallel_for(0, B * N * T, grain, [&](std::int64_t begin, std::int64_t end) {
    for (auto row = begin; row < end; ++row) {
      const auto t = row % T, n = (row / T) % N, b = row / (T * N);
      kernels::rotate_row(xp + b * xs[0] + n * xs[1] + t * xs[2], cp + b * cs[0] + t * cs[1], sp + b * ss[0] + t * ss[1],
                          yp + b * ys[0] + n * ys[1] + t * ys[2], D / 2, transpose);
    }
  });
  return out;
}

struct FusedRotary : public torch::autograd::Function<FusedRotary> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
    ctx->save_for_backward({cos, sin});
    return rotate(x, {cos, sin}, /*transpose=*/false);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    return {rotate(grads[0].to(at::kFloat), {saved[0], saved[1]}, /*transpose=*/true), at::Tensor(), at::Tensor()};
  }
};

bool fused(const at::Tensor& x, const RotaryAngles& angles) {
  auto float_cpu = [](const at::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == at::kFloat; };
  if (!float_cpu(x) || !float_cpu(angles.cos) || !float_cpu(angles.sin) || x.dim() != 4 || x.size(-1) % 2 != 0) return false;
  if (angles.cos.requires_grad() || angles.sin.requires_grad()) return false;
  for (const auto* t : {&angles.cos, &angles.sin}) {
    if (t->dim() != 4 || t->size(1) != 1 || t->size(2) != x.size(2) || t->size(3) != x.size(3) || t->stride(3) != 1) return false;
    if (t->size(0) != x.size(0) && t->size(0) != 1) return false;
  }
  return x.numel() > 0;
}

}  // namespace

at::Tensor apply_rotary(const at::Tensor& x, const RotaryAngles& angles) {
  if (!fused(x, angles)) return apply_rotary_reference(x, angles);
  if (!x.requires_grad() || !at::GradMode::is_enabled()) return rotate(x, angles, /*transpose=*/false);
  return FusedRotary::apply(x, angles.cos, angles.sin);
}

}  // namespace dew::nn
