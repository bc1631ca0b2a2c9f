#include "dew/objectives/diffusion/loss_weighting.h"

#include "dew/core/error.h"

namespace dew::objectives::diffusion {

Weighting parse_weighting(const std::string& name) {
  if (name == "none") return Weighting::none;
  if (name == "min_snr") return Weighting::min_snr;
  if (name == "p2") return Weighting::p2;
  fail("diffusion.weighting = \"", name, "\" is not a loss weighting; use none (the schedule's), min_snr or p2");
}

std::string to_string(Weighting w) {
  switch (w) {
    case Weighting::none: return "none";
    case Weighting::min_snr: return "min_snr";
    case Weighting::p2: return "p2";
  }
  return "?";
}

at::Tensor signal_to_noise(const at::Tensor& alpha, const at::Tensor& sigma) { return (alpha * alpha) / (sigma * sigma); }

at::Tensor x0_error_scale(Prediction p, const at::Tensor& alpha, const at::Tensor& sigma) {
  switch (p) {
    case Prediction::noise: return (sigma * sigma) / (alpha * alpha);  // x0 = (x_t - sigma eps) / alpha
    case Prediction::sample: return at::ones_like(alpha);
    case Prediction::velocity: {
      const auto norm = alpha * alpha + sigma * sigma;  // x0 = (alpha x_t - sigma v) / norm
      return (sigma * sigma) / (norm * norm);
    }
    case Prediction::flow_velocity: return sigma * sigma;  // x0 = x_t - sigma u
  }
  fail("x0_error_scale: unknown prediction");
}

at::Tensor eps_error_scale(Prediction p, const at::Tensor& alpha, const at::Tensor& sigma) {
  switch (p) {
    case Prediction::noise: return at::ones_like(alpha);
    case Prediction::sample: return (alpha * alpha) / (sigma * sigma);  // eps = (x_t - alpha x0) / sigma
    case Prediction::velocity: {
      const auto norm = alpha * alpha + sigma * sigma;  // eps = (sigma x_t + alpha v) / norm
      return (alpha * alpha) / (norm * norm);
    }
    case Prediction::flow_velocity: return alpha * alpha;  // eps = x_t + alpha u
  }
  fail("eps_error_scale: unknown prediction");
}

at::Tensor min_snr_weight(Prediction p, const at::Tensor& alpha, const at::Tensor& sigma, double gamma) {
  const auto snr = signal_to_noise(alpha, sigma);
  // min(snr, g) / snr written as min(1, g / snr): finite at snr = 0 (pure noise) and snr = inf.
  if (p == Prediction::noise) return (gamma / snr).clamp_max(1.0);
  return snr.clamp_max(gamma) * x0_error_scale(p, alpha, sigma);
}

at::Tensor p2_weight(Prediction p, const at::Tensor& alpha, const at::Tensor& sigma, double k, double gamma) {
  // 1/(k + snr)^gamma on the noise error, carried to the target by |d eps / d target|^2.
  return (signal_to_noise(alpha, sigma) + k).pow(-gamma) * eps_error_scale(p, alpha, sigma);
}

}  // namespace dew::objectives::diffusion
