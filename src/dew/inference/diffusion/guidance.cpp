// Classifier-free guidance (guidance.h).
#include "dew/inference/diffusion/guidance.h"

#include <cmath>

#include "dew/core/error.h"

namespace dew::inference::diffusion {

using processes::broadcast_over;
using processes::from_prediction;

void Guidance::validate(const std::string& prefix) const {
  if (!std::isfinite(scale)) fail(prefix, ".scale = ", scale, "; use a finite number (1 = no guidance)");
  if (!(sigma_lo >= 0) || !std::isfinite(sigma_lo)) fail(prefix, ".sigma_lo = ", sigma_lo, "; use a number >= 0");
  if (sigma_hi && !(*sigma_hi > sigma_lo))
    fail(prefix, ".sigma_hi = ", *sigma_hi, " is not above ", prefix, ".sigma_lo = ", sigma_lo, "; the interval would be empty");
  if (!(rescale >= 0 && rescale <= 1)) fail(prefix, ".rescale = ", rescale, "; use a number in [0, 1] (0 = off)");
}

bool Guidance::active(double karras_sigma) const {
  if (scale == 1.0) return false;
  return karras_sigma > sigma_lo && (!sigma_hi || karras_sigma <= *sigma_hi);
}

Denoised guide(const Denoised& cond, const Denoised& uncond, const at::Tensor& x_t, const at::Tensor& alpha,
               const at::Tensor& sigma, double karras_sigma, const Guidance& guidance) {
  if (!guidance.active(karras_sigma)) return cond;
  Denoised out{uncond.x0 + guidance.scale * (cond.x0 - uncond.x0), uncond.eps + guidance.scale * (cond.eps - uncond.eps)};
  if (guidance.rescale == 0.0) return out;
  std::vector<std::int64_t> dims;
  for (std::int64_t d = 1; d < x_t.dim(); ++d) dims.push_back(d);
  // Per-sample std over every element but the batch (torch.std's unbiased estimate, as diffusers).
  const at::Tensor ratio = cond.x0.std(dims, /*unbiased=*/true, /*keepdim=*/true) / out.x0.std(dims, true, true);
  const at::Tensor x0 = guidance.rescale * (out.x0 * ratio) + (1.0 - guidance.rescale) * out.x0;
  const std::int64_t rank = x_t.dim();
  const at::Tensor a = broadcast_over(alpha, rank), s = broadcast_over(sigma, rank);
  return {x0, (x_t - a * x0) / s};
}

Denoiser guided_denoiser(const NoiseProcess& process, processes::Prediction prediction,
                         ConditionalModel model, at::Tensor labels, std::int64_t null_label, Guidance guidance) {
  guidance.validate();
  return [&process, prediction, model = std::move(model), labels = std::move(labels), null_label, guidance](
             const at::Tensor& x, const at::Tensor& t) {
    if (labels.dim() != 1 || labels.size(0) != x.size(0))
      fail("diffusion sampling: ", labels.dim() == 1 ? labels.size(0) : -1, " labels for a batch of ", x.size(0), " images");
    const auto [alpha, sigma] = process.alpha_sigma(t);
    const double k_sigma = process.karras_sigma(t.index({0}).to(at::kDouble).cpu()).item<double>();
    const at::Tensor time = process.model_time(t);
    const at::Tensor on_device = labels.to(x.device());
    if (!guidance.active(k_sigma)) return from_prediction(prediction, model(x, time, on_device), x, alpha, sigma);
    const at::Tensor out = model(at::cat({x, x}), at::cat({time, time}), at::cat({on_device, at::full_like(on_device, null_label)}));
    const auto halves = out.chunk(2);
    const Denoised cond = from_prediction(prediction, halves[0], x, alpha, sigma);
    const Denoised uncond = from_prediction(prediction, halves[1], x, alpha, sigma);
    return guide(cond, uncond, x, alpha, sigma, k_sigma, guidance);
  };
}

}  // namespace dew::inference::diffusion
