// Timestep spacings (schedule.h).
#include "dew/inference/diffusion/schedule.h"

#include <cmath>
#include <limits>

#include "dew/core/error.h"

namespace dew::inference::diffusion {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Karras et al. 2022, eq. 5: (hi^(1/rho) + i/(N-1) (lo^(1/rho) - hi^(1/rho)))^rho, i = 0..N-1.
std::vector<double> karras_levels(double lo, double hi, std::int64_t n, double rho) {
  std::vector<double> out;
  const double lo_r = std::pow(lo, 1.0 / rho), hi_r = std::pow(hi, 1.0 / rho);
  for (std::int64_t i = 0; i < n; ++i) {
    const double ramp = n == 1 ? 0.0 : static_cast<double>(i) / static_cast<double>(n - 1);
    out.push_back(std::pow(hi_r + ramp * (lo_r - hi_r), rho));
  }
  return out;
}

std::vector<double> map_tensor(const at::Tensor& values) {
  const at::Tensor v = values.to(at::kDouble).contiguous().cpu();
  return {v.data_ptr<double>(), v.data_ptr<double>() + v.numel()};
}

// vp: diffusers' integer formulas over the T train timesteps.
std::vector<double> vp_times(Spacing spacing, std::int64_t steps, std::int64_t train_steps) {
  std::vector<double> t;
  const double T = static_cast<double>(train_steps), n = static_cast<double>(steps);
  if ((spacing == Spacing::leading || spacing == Spacing::trailing) && steps > train_steps)
    fail("diffusion sampling: steps = ", steps, " is more than diffusion.train_steps = ", train_steps,
         " with the ", to_string(spacing), " spacing (each step is a distinct train timestep); use at most ",
         train_steps, " steps, or the linspace or karras spacing");
  for (std::int64_t i = 0; i < steps; ++i) {
    switch (spacing) {
      case Spacing::linspace:  // np.linspace(0, T-1, N)[::-1]
        t.push_back(steps == 1 ? T - 1 : (T - 1) * static_cast<double>(steps - 1 - i) / (n - 1));
        break;
      case Spacing::leading:  // (np.arange(0, N) * (T // N))[::-1]
        t.push_back(static_cast<double>((steps - 1 - i) * (train_steps / steps)));
        break;
      case Spacing::trailing:  // np.round(np.arange(T, 0, -T/N)) - 1 (np.round rounds half to even)
        t.push_back(std::nearbyint(T - static_cast<double>(i) * (T / n)) - 1);
        break;
      case Spacing::karras: break;
    }
  }
  return t;
}

// edm and flow: the same rules on the continuous range [lo, hi].
std::vector<double> continuous_times(Spacing spacing, std::int64_t steps, double lo, double hi) {
  std::vector<double> t;
  const double n = static_cast<double>(steps);
  for (std::int64_t i = 0; i < steps; ++i) {
    const double k = static_cast<double>(i);
    switch (spacing) {
      case Spacing::linspace: t.push_back(steps == 1 ? hi : hi + (lo - hi) * k / (n - 1)); break;
      case Spacing::leading: t.push_back(lo + (hi - lo) * (n - 1 - k) / n); break;
      case Spacing::trailing: t.push_back(lo + (hi - lo) * (n - k) / n); break;
      case Spacing::karras: break;
    }
  }
  return t;
}

}  // namespace

Spacing parse_spacing(const std::string& name) {
  if (name == "linspace" || name == "uniform") return Spacing::linspace;
  if (name == "leading") return Spacing::leading;
  if (name == "trailing") return Spacing::trailing;
  if (name == "karras") return Spacing::karras;
  fail("timestep spacing \"", name, "\" is not one dew knows; use linspace (or uniform), leading, trailing or karras");
}

std::string to_string(Spacing spacing) {
  switch (spacing) {
    case Spacing::linspace: return "linspace";
    case Spacing::leading: return "leading";
    case Spacing::trailing: return "trailing";
    case Spacing::karras: return "karras";
  }
  return "?";
}

Spacing default_spacing(ProcessKind kind) {
  switch (kind) {
    case ProcessKind::vp: return Spacing::trailing;
    case ProcessKind::edm: return Spacing::karras;
    case ProcessKind::flow: return Spacing::linspace;
  }
  return Spacing::linspace;
}

double Schedule::karras_sigma(std::size_t i) const {
  return alpha[i] == 0.0 ? kInf : sigma[i] / alpha[i];
}

double Schedule::lambda(std::size_t i) const {
  return std::log(alpha[i]) - std::log(sigma[i]);  // log(0) = -inf at either end, as intended
}

Schedule schedule_from_times(const NoiseProcess& process, std::vector<double> times) {
  if (times.empty()) fail("diffusion sampling: a schedule needs at least one step");
  for (std::size_t i = 0; i < times.size(); ++i) {
    if (!std::isfinite(times[i])) fail("diffusion sampling: time ", i, " of the schedule is ", times[i]);
    if (i > 0 && !(times[i] < times[i - 1]))
      fail("diffusion sampling: the schedule's times must decrease, but time ", i, " = ", times[i],
           " follows ", times[i - 1], " (too many steps for the range?)");
  }
  Schedule schedule;
  schedule.t = std::move(times);
  const auto [alpha, sigma] = process.alpha_sigma(at::tensor(schedule.t, at::kDouble));
  schedule.alpha = map_tensor(alpha);
  schedule.sigma = map_tensor(sigma);
  schedule.alpha.push_back(1.0);
  schedule.sigma.push_back(0.0);
  return schedule;
}

Schedule make_schedule(const NoiseProcess& process, Spacing spacing, std::int64_t steps, double rho) {
  if (steps < 1) fail("diffusion sampling: steps = ", steps, "; use at least 1");
  if (!(rho > 0) || !std::isfinite(rho)) fail("diffusion sampling: karras rho = ", rho, "; use a positive number (7 is usual)");
  const ProcessKind kind = process.kind();
  std::vector<double> t;
  if (kind == ProcessKind::flow) {
    t = spacing == Spacing::karras ? karras_levels(kFlowTimeMin, 1.0, steps, rho)
                                   : continuous_times(spacing, steps, kFlowTimeMin, 1.0);
    t = map_tensor(process.shift_time(at::tensor(t, at::kDouble)));
  } else if (spacing == Spacing::karras) {
    const auto ends = process.karras_sigma(at::tensor(std::vector<double>{process.t_min(), process.t_max()}, at::kDouble));
    const auto levels = karras_levels(ends[0].item<double>(), ends[1].item<double>(), steps, rho);
    t = map_tensor(process.time_from_karras_sigma(at::tensor(levels, at::kDouble)));
  } else if (kind == ProcessKind::vp) {
    t = vp_times(spacing, steps, process.config().train_steps);
  } else {
    t = continuous_times(spacing, steps, process.t_min(), process.t_max());
  }
  return schedule_from_times(process, std::move(t));
}

}  // namespace dew::inference::diffusion
