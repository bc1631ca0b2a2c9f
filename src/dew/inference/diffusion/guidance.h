#pragma once
// Classifier-free guidance (Ho & Salimans 2022) with a guidance interval (Kynkäänniemi et al. 2024) and
// guidance rescale (Lin et al. 2023), and the Denoiser that applies it around a class-conditional model.
//
//   guided = uncond + scale (cond - uncond), for x0 and eps alike (both are affine in the model output at
//            a fixed x_t, so the pair stays consistent);
//   interval: guide only where lo < sigma/alpha <= hi (the k-diffusion sigma of the step); elsewhere the
//            conditional output is used alone (and guided_denoiser skips the unconditional half);
//   rescale phi: x0_r = x0_g * std(cond x0) / std(x0_g) per sample; x0 = phi x0_r + (1 - phi) x0_g, and eps
//            follows from x_t = alpha x0 + sigma eps. The std is over each sample's elements, as diffusers'
//            rescale_noise_cfg; dew rescales x0 (the image whose over-exposure the rescale corrects) rather
//            than eps, so the pair stays consistent.
#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <optional>

#include "dew/inference/diffusion/solver.h"
#include "dew/processes/prediction.h"

namespace dew::inference::diffusion {

struct Guidance {
  double scale = 1.0;                  // 1 = conditional only (no second half), 0 = unconditional only
  double sigma_lo = 0.0;               // guide where sigma/alpha > sigma_lo ...
  std::optional<double> sigma_hi;      // ... and <= sigma_hi (none = no upper limit)
  double rescale = 0.0;                // phi in [0, 1]; 0 = off

  template <class V>
  void fields(V& v) {
    v("scale", scale, "classifier-free guidance scale: 1 = conditional only, 0 = unconditional, > 1 stronger");
    v("sigma_lo", sigma_lo, "guidance interval: guide only where the step's sigma/alpha is above this");
    v("sigma_hi", sigma_hi, "guidance interval: guide only where the step's sigma/alpha is at most this (unset = no limit)");
    v("rescale", rescale, "guidance rescale phi in [0, 1] (Lin et al. 2023); 0 = off");
  }
  // Refuses NaN or infinite scales, negative or reversed intervals and phi outside [0, 1], naming
  // `prefix`.field (e.g. "sample.guidance.scale") and the value.
  void validate(const std::string& prefix = "guidance") const;
  // Whether the step at this sigma/alpha mixes in the unconditional output.
  bool active(double karras_sigma) const;
};

// Mixes the halves of one batched forward (cond, uncond: Denoised of the same x_t) at a step whose
// sigma/alpha is karras_sigma. x_t, alpha and sigma as from_prediction (alpha, sigma broadcast over x_t);
// they are needed only for the rescale.
Denoised guide(const Denoised& cond, const Denoised& uncond, const at::Tensor& x_t, const at::Tensor& alpha,
               const at::Tensor& sigma, double karras_sigma, const Guidance& guidance);

// What a class-conditional image network is to the sampler: x [B, C, H, W] (the process's x_t), time [B]
// (process.model_time(t)), labels [B] int64 -> the prediction (EDM preconditioning, if any, inside it).
using ConditionalModel = std::function<at::Tensor(const at::Tensor& x, const at::Tensor& time, const at::Tensor& labels)>;

// The Denoiser for `model` with these labels [B] ([B] int64; `null_label` is the "no label" class the model
// was trained with under label dropout). Where guidance is active it runs ONE forward on the batch
// [x; x] with labels [labels; null_label] and splits it; elsewhere (and at scale 1) a forward on x alone.
Denoiser guided_denoiser(const NoiseProcess& process, processes::Prediction prediction,
                         ConditionalModel model, at::Tensor labels, std::int64_t null_label, Guidance guidance);

}  // namespace dew::inference::diffusion
