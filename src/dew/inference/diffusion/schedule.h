#pragma once
// The grid a sampler walks: N model times from noisy to clean and the noise level at each, plus the clean
// level the last step lands on.
//
// Spacings (N = steps; vp times are timestep indices 0..T-1, edm times are sigmas, flow times are t):
//   linspace  N times evenly from the top to the bottom of the range, both included (diffusers' "linspace":
//             vp T-1 .. 0 as EulerDiscreteScheduler; flow 1 .. 1/1000 as FlowMatchEulerDiscreteScheduler).
//             "uniform" is another name for it.
//   leading   bottom + i * (range / N), i = N-1 .. 0: the top is never evaluated (diffusers' "leading",
//             DDPM / DDIM / PNDM's default: vp floor(T/N) * i).
//   trailing  bottom + i * (range / N), i = N .. 1: starts at the top, stops one interval above the bottom
//             (diffusers' "trailing", vp round(T - i * T/N) - 1; Lin et al. 2023).
//   karras    sigma/alpha spaced as Karras et al. 2022 (rho) between its values at the bottom and the top
//             (diffusers' use_karras_sigmas); flow applies the formula to t itself, as diffusers'
//             FlowMatch schedulers do, since sigma/alpha is infinite at t = 1.
// The range is the process's [t_min, t_max], except flow's bottom, 1/1000: the smallest time diffusers'
// FlowMatch schedulers sample (1 / num_train_timesteps), because the model at t = 0 has nothing to remove.
// Flow times then pass through the process's shift_time (diffusion.flow_shift).
#include <cstdint>
#include <string>
#include <vector>

#include "dew/processes/noise_process.h"

namespace dew::inference::diffusion {

using processes::NoiseProcess;
using processes::ProcessKind;

enum class Spacing { linspace, leading, trailing, karras };

// "linspace" (or "uniform") | "leading" | "trailing" | "karras"; refused by name otherwise.
Spacing parse_spacing(const std::string& name);
std::string to_string(Spacing spacing);
// What `dew sample` uses when no spacing is named: karras for edm (the schedule EDM was designed with),
// trailing for vp (it starts at the top of the range, where x_T ~ N(0, I) is drawn), linspace for flow.
Spacing default_spacing(ProcessKind kind);

// The smallest flow time a spacing reaches (see above).
inline constexpr double kFlowTimeMin = 1.0 / 1000.0;

struct Schedule {
  std::vector<double> t;      // N model times, from noisy to clean (decreasing)
  std::vector<double> alpha;  // N + 1: alpha at each t, then 1 (clean)
  std::vector<double> sigma;  // N + 1: sigma at each t, then 0 (clean)

  std::int64_t steps() const { return static_cast<std::int64_t>(t.size()); }
  // sigma/alpha (the k-diffusion sigma) of level i; 0 at the clean level, inf where alpha is 0 (flow t = 1).
  double karras_sigma(std::size_t i) const;
  // log(alpha/sigma) of level i (DPM-Solver's lambda): -inf where alpha is 0, +inf at the clean level.
  double lambda(std::size_t i) const;
};

// The times of `spacing` for `steps` model calls (before flow's shift), and their noise levels. `rho` is the
// karras exponent. Refuses steps < 1 and, for vp leading/trailing, more steps than train timesteps.
Schedule make_schedule(const NoiseProcess& process, Spacing spacing, std::int64_t steps, double rho = 7.0);
// A schedule of the given (decreasing) model times, for callers that choose their own (tests, diffusers'
// custom `timesteps`). Times are used as given: no shift.
Schedule schedule_from_times(const NoiseProcess& process, std::vector<double> times);

}  // namespace dew::inference::diffusion
