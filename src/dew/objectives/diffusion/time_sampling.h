#pragma once
// How training draws each example's time t (the process's own variable, noise_process.h):
//   uniform       vp: integer t uniform in [0, T); flow: t uniform in (0, 1], then flow_shift;
//                 edm: log sigma uniform in [log sigma_min, log sigma_max].
//   logit_normal  t = sigmoid(mean + std * n), n ~ N(0, 1) (SD3; defaults 0, 1): flow then applies
//                 flow_shift; vp takes floor(u * T) (diffusers' training scripts); refused for edm.
//   lognormal     edm: ln sigma ~ N(p_mean, p_std) (Karras et al. 2022: -1.2, 1.2); refused otherwise.
//   auto          vp uniform, flow logit_normal, edm lognormal.
// Draws are made on the CPU from the generator given, so a (seed, step) gives the same times on any device.
#include <cstdint>
#include <string>

#include <ATen/ATen.h>

#include "dew/processes/noise_process.h"

namespace dew::objectives::diffusion {

// The processes this objective trains against live below objectives and inference (processes/).
using processes::NoiseProcess;
using processes::ProcessKind;

enum class TimeSampling { uniform, logit_normal, lognormal };

struct TimeSamplingConfig {
  std::string kind = "auto";  // auto | uniform | logit_normal | lognormal
  double logit_mean = 0.0, logit_std = 1.0;
  double p_mean = -1.2, p_std = 1.2;
};

// The sampling `kind` names for `process` ("auto" resolved); refuses a kind the process does not support,
// naming diffusion.time_sampling, the value and the process.
TimeSampling resolve_time_sampling(const std::string& kind, ProcessKind process);
std::string to_string(TimeSampling s);

// [count] times, float32 on the CPU (vp: whole numbers), drawn from `generator` (a CPU generator).
at::Tensor sample_times(const NoiseProcess& process, const TimeSamplingConfig& config, std::int64_t count,
                        at::Generator& generator);

}  // namespace dew::objectives::diffusion
