#pragma once
// Per-example loss weights for diffusion training, as weights on the mean squared error of whatever the
// network predicts (its "target"). SNR = alpha^2 / sigma^2.
//
// Published weightings are stated in one parameterisation; dew converts them to the trained target by
// how an error in the target moves the implied x0 (at fixed x_t): |d x0 / d target|^2 =
//   noise 1/snr,  sample 1,  v sigma^2/(alpha^2+sigma^2)^2 (= 1/(snr+1) for vp),  flow sigma^2.
//   min_snr  Hang et al. 2023: weight min(snr, gamma) on the x0 error, i.e. min(snr,g)/snr on a noise
//            target, min(snr,g)/(snr+1) on v (vp), min(snr,g) on x0, min(snr,g)*sigma^2 on flow velocity.
//   p2       Choi et al. 2022: weight 1/(k + snr)^gamma on the noise error (their L_simple), i.e. on the
//            x0 error snr/(k + snr)^gamma, converted the same way.
//   none     the schedule's own: plain MSE on the target (EDM: its lambda(sigma), edm_preconditioning.h,
//            which the objective applies itself).
#include <string>

#include <ATen/ATen.h>

#include "dew/processes/prediction.h"

namespace dew::objectives::diffusion {

// The processes this objective trains against live below objectives and inference (processes/).
using processes::Prediction;

enum class Weighting { none, min_snr, p2 };

Weighting parse_weighting(const std::string& name);  // "none" | "min_snr" | "p2"; refused by name otherwise
std::string to_string(Weighting w);

at::Tensor signal_to_noise(const at::Tensor& alpha, const at::Tensor& sigma);  // alpha^2 / sigma^2
// |d x0 / d target|^2 at fixed x_t for prediction p (the conversion factor above).
at::Tensor x0_error_scale(Prediction p, const at::Tensor& alpha, const at::Tensor& sigma);
// |d eps / d target|^2 at fixed x_t: noise 1, sample snr, v alpha^2/(alpha^2+sigma^2)^2, flow alpha^2.
at::Tensor eps_error_scale(Prediction p, const at::Tensor& alpha, const at::Tensor& sigma);
// The weight on the target's squared error; shape of alpha (and sigma).
at::Tensor min_snr_weight(Prediction p, const at::Tensor& alpha, const at::Tensor& sigma, double gamma);
at::Tensor p2_weight(Prediction p, const at::Tensor& alpha, const at::Tensor& sigma, double k, double gamma);

}  // namespace dew::objectives::diffusion
