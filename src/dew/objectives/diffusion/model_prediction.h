#pragma once
// One way to run an image-diffusion network at (x_t, t), shared by training and sampling so they cannot
// disagree about the network's inputs: the objective's loss and a solver's denoiser both go through here.
//   vp, flow  out = model(x_t, process.model_time(t), labels), read as `prediction`
//   edm       the preconditioned denoiser (edm_preconditioning.h):
//             D = c_skip x_t + c_out model(c_in x_t, c_noise, labels), which predicts the sample (x0);
//             prediction must be sample.
#include <functional>

#include <ATen/ATen.h>

#include "dew/processes/noise_process.h"

namespace dew::objectives::diffusion {

// The processes this objective trains against live below objectives and inference (processes/).
using processes::Denoised;
using processes::NoiseProcess;
using processes::Prediction;
using processes::from_prediction;

// A network: x [B, C, H, W] float, time [B] float (the process's model_time), labels [B] int64 in
// [0, num_classes] (num_classes = no label) -> [B, C, H, W].
using ImageModelFn = std::function<at::Tensor(const at::Tensor& x, const at::Tensor& time, const at::Tensor& labels)>;

// The network's prediction at (x_t, t) in `prediction`'s terms (for from_prediction). t: [B], the process's
// time (vp timestep, edm sigma, flow t), on x_t's device.
at::Tensor model_prediction(const NoiseProcess& process, Prediction prediction, const ImageModelFn& model,
                            const at::Tensor& x_t, const at::Tensor& t, const at::Tensor& labels);
// The same, converted to (x0, eps) at t's alpha, sigma: what a solver's Denoiser returns (before guidance
// is mixed in, a caller may also mix the model_prediction outputs: the conversion is affine in them).
Denoised model_denoised(const NoiseProcess& process, Prediction prediction, const ImageModelFn& model,
                        const at::Tensor& x_t, const at::Tensor& t, const at::Tensor& labels);

}  // namespace dew::objectives::diffusion
