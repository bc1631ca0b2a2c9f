#pragma once
// What an image-diffusion network predicts, and the conversions between that and (x0, eps).
//
// Every process writes x_t = alpha * x0 + sigma * eps (noise_process.h). A network predicts one of:
//   noise          eps
//   sample         x0
//   velocity       v = alpha * eps - sigma * x0             (Salimans & Ho 2022; for any alpha, sigma)
//   flow_velocity  u = eps - x0                              (rectified flow; needs alpha + sigma = 1)
// Given x_t and one of these, the pair (x0, eps) is determined; the formulas below are exact inverses of
// to_prediction for any alpha, sigma where the division is defined (noise needs alpha != 0, sample needs
// sigma != 0: at the ends of a schedule the caller picks a prediction that is defined there).
#include <string>

#include <ATen/ATen.h>

namespace dew::processes {

enum class Prediction { noise, sample, velocity, flow_velocity };  // "noise" | "sample" | "v" | "flow" in configs

// "noise" | "sample" | "v" | "flow"; anything else is refused naming the value and the choices.
Prediction parse_prediction(const std::string& name);
std::string to_string(Prediction p);  // the config spelling: "noise", "sample", "v", "flow"

struct Denoised {
  at::Tensor x0, eps;
};

// alpha and sigma are scalars, or [B] (or any shape that is a prefix of x_t's), broadcast over x_t's
// trailing dimensions. The arithmetic runs in the promoted dtype of the operands.
Denoised from_prediction(Prediction p, const at::Tensor& out, const at::Tensor& x_t, const at::Tensor& alpha,
                         const at::Tensor& sigma);
at::Tensor to_prediction(Prediction p, const at::Tensor& x0, const at::Tensor& eps, const at::Tensor& alpha,
                         const at::Tensor& sigma);

// `a` viewed with trailing singleton dimensions so that it broadcasts against a tensor of rank `rank`
// ([B] -> [B, 1, 1, 1] for images); a scalar stays a scalar.
at::Tensor broadcast_over(const at::Tensor& a, std::int64_t rank);

}  // namespace dew::processes
