#pragma once
// The forward (noising) processes of image diffusion. Every process writes
//   x_t = alpha(t) * x0 + sigma(t) * eps,   eps ~ N(0, I),
// and differs in its time variable and its alpha, sigma:
//   vp    variance preserving (DDPM): t = timestep index 0..T-1 of a discrete beta schedule;
//         alpha = sqrt(abar_t), sigma = sqrt(1 - abar_t), abar = cumprod(1 - beta) exactly as diffusers'
//         DDPMScheduler builds it (float32 betas and cumprod), held in float64.
//   edm   variance exploding in Karras et al. 2022's form: t = sigma; alpha = 1.
//   flow  rectified flow: t in [0, 1], alpha = 1 - t, sigma = t (1 = pure noise).
// Solvers step in the "k-diffusion sigma" s = sigma / alpha, which is the same ODE variable for all three
// (x_t / alpha = x0 + s eps), so one solver serves every process through karras_sigma and its inverse.
#include <cstdint>
#include <string>
#include <utility>

#include <ATen/ATen.h>

#include "dew/processes/prediction.h"

namespace dew::processes {

enum class ProcessKind { vp, edm, flow };

ProcessKind parse_process(const std::string& name);  // "vp" | "edm" | "flow"; refused by name otherwise
std::string to_string(ProcessKind kind);

// The noise process's part of a diffusion run's "diffusion" config section.
struct NoiseProcessConfig {
  std::string process = "flow";          // vp | edm | flow
  std::string schedule = "linear";       // vp only: linear | cosine (diffusers "squaredcos_cap_v2")
  std::int64_t train_steps = 1000;       // vp only: discrete timesteps 0..T-1 (diffusers num_train_timesteps)
  double beta_start = 1e-4, beta_end = 0.02;  // vp linear (diffusers DDPMScheduler defaults)
  double sigma_min = 0.002, sigma_max = 80.0, sigma_data = 0.5, rho = 7.0;  // edm (Karras et al. 2022)
  double flow_shift = 1.0;               // flow: t' = shift*t / (1 + (shift-1)*t) (SD3 / diffusers FlowMatch)

  template <class V>
  void fields(V& v) {
    v("process", process, "noise process: vp (DDPM), edm (Karras sigmas) or flow (rectified flow)");
    v("schedule", schedule, "vp beta schedule: linear or cosine (diffusers squaredcos_cap_v2)");
    v("train_steps", train_steps, "vp: number of discrete timesteps T (diffusers num_train_timesteps)");
    v("beta_start", beta_start, "vp linear schedule: beta at t = 0");
    v("beta_end", beta_end, "vp linear schedule: beta at t = T-1");
    v("sigma_min", sigma_min, "edm: smallest sigma a sampler reaches");
    v("sigma_max", sigma_max, "edm: largest sigma (where sampling starts)");
    v("sigma_data", sigma_data, "edm: standard deviation of the data (preconditioning and loss weight)");
    v("rho", rho, "edm: exponent of the Karras sigma spacing");
    v("flow_shift", flow_shift, "flow: time shift t' = shift*t/(1+(shift-1)*t) applied to sampled and sampler times; 1 = none");
  }
  // Refuses a bad value with diffusion.<field> = value and what is allowed.
  void validate() const;
};

class NoiseProcess {
 public:
  explicit NoiseProcess(NoiseProcessConfig config);  // validates the config

  ProcessKind kind() const { return kind_; }
  const NoiseProcessConfig& config() const { return config_; }

  // vp: the train table abar, float64 [T] on the CPU (diffusers' float32 alphas_cumprod, each value held
  // exactly in float64); an undefined tensor for the other processes.
  const at::Tensor& alphas_cumprod() const { return alphas_cumprod_; }

  // alpha and sigma at t: float32 (float64 when t is float64), same shape as t, on t's device.
  // vp: integer t reads the table (alpha = sqrt(abar_t), sigma = sqrt(1 - abar_t)); fractional t
  // interpolates log(sigma/alpha) linearly between the neighbouring integers, as k-diffusion's
  // DiscreteSchedule.t_to_sigma does; t is clamped to [0, T-1].
  std::pair<at::Tensor, at::Tensor> alpha_sigma(const at::Tensor& t) const;
  // x0: [B, ...], eps: same shape, t: [B]; returns alpha(t) x0 + sigma(t) eps in x0's dtype.
  at::Tensor add_noise(const at::Tensor& x0, const at::Tensor& eps, const at::Tensor& t) const;
  // What the network's time embedding receives for t (float32): vp = t, edm = log(sigma)/4 (EDM's c_noise),
  // flow = 1000*t (diffusers' FlowMatch timesteps).
  at::Tensor model_time(const at::Tensor& t) const;
  // sigma/alpha at t: vp sqrt((1-abar)/abar) (interpolated like alpha_sigma), edm sigma, flow t/(1-t)
  // (inf at t = 1). Dtype as alpha_sigma.
  at::Tensor karras_sigma(const at::Tensor& t) const;
  // The inverse of karras_sigma (vp: k-diffusion's sigma_to_t, clamped to [0, T-1]; flow: s/(1+s), 1 at
  // s = inf; edm: s).
  at::Tensor time_from_karras_sigma(const at::Tensor& s) const;
  // flow: t -> shift*t / (1 + (shift-1)*t) with diffusion.flow_shift (the shift SD3 and diffusers'
  // FlowMatchEulerDiscreteScheduler apply to its sigmas); the identity for vp and edm. The objective applies
  // it to the times it draws; a sampler applies it to its spacing's times before stepping.
  // (Not in the issue-10 contract's first list; added beside it.)
  at::Tensor shift_time(const at::Tensor& t) const;
  // The largest and smallest t a sampler spans: vp T-1 and 0, edm sigma_max and sigma_min, flow 1 and 0.
  double t_max() const;
  double t_min() const;

 private:
  at::Tensor vp_log_karras_sigma(const at::Tensor& t) const;  // float64, interpolated

  NoiseProcessConfig config_;
  ProcessKind kind_;
  at::Tensor alphas_cumprod_;   // vp: float64 [T]
  at::Tensor log_sigmas_;       // vp: float64 [T], log(sqrt((1 - abar)/abar)), increasing
};

}  // namespace dew::processes
