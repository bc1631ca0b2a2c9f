#include "dew/processes/prediction.h"

#include "dew/core/error.h"

namespace dew::processes {

Prediction parse_prediction(const std::string& name) {
  if (name == "noise") return Prediction::noise;
  if (name == "sample") return Prediction::sample;
  if (name == "v") return Prediction::velocity;
  if (name == "flow") return Prediction::flow_velocity;
  fail("diffusion.prediction = \"", name, "\" is not a prediction target; use noise, sample, v or flow");
}

std::string to_string(Prediction p) {
  switch (p) {
    case Prediction::noise: return "noise";
    case Prediction::sample: return "sample";
    case Prediction::velocity: return "v";
    case Prediction::flow_velocity: return "flow";
  }
  return "?";
}

at::Tensor broadcast_over(const at::Tensor& a, std::int64_t rank) {
  if (a.dim() == 0 || a.dim() >= rank) return a;
  std::vector<std::int64_t> shape(a.sizes().begin(), a.sizes().end());
  shape.resize(static_cast<std::size_t>(rank), 1);
  return a.reshape(shape);
}

Denoised from_prediction(Prediction p, const at::Tensor& out, const at::Tensor& x_t, const at::Tensor& alpha_in,
                         const at::Tensor& sigma_in) {
  const auto alpha = broadcast_over(alpha_in, x_t.dim()), sigma = broadcast_over(sigma_in, x_t.dim());
  switch (p) {
    case Prediction::noise:
      return {(x_t - sigma * out) / alpha, out};
    case Prediction::sample:
      return {out, (x_t - alpha * out) / sigma};
    case Prediction::velocity: {
      // Solving x_t = a x0 + s eps, v = a eps - s x0 for (x0, eps); a^2 + s^2 = 1 for vp, not for edm.
      const auto norm = alpha * alpha + sigma * sigma;
      return {(alpha * x_t - sigma * out) / norm, (sigma * x_t + alpha * out) / norm};
    }
    case Prediction::flow_velocity:
      // x_t = (1 - s) x0 + s eps = x0 + s u = eps - a u.
      return {x_t - sigma * out, x_t + alpha * out};
  }
  fail("from_prediction: unknown prediction");
}

at::Tensor to_prediction(Prediction p, const at::Tensor& x0, const at::Tensor& eps, const at::Tensor& alpha_in,
                         const at::Tensor& sigma_in) {
  switch (p) {
    case Prediction::noise: return eps;
    case Prediction::sample: return x0;
    case Prediction::velocity: {
      const auto alpha = broadcast_over(alpha_in, x0.dim()), sigma = broadcast_over(sigma_in, x0.dim());
      return alpha * eps - sigma * x0;
    }
    case Prediction::flow_velocity: return eps - x0;
  }
  fail("to_prediction: unknown prediction");
}

}  // namespace dew::processes
