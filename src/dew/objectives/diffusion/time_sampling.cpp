#include "dew/objectives/diffusion/time_sampling.h"

#include <cmath>

#include "dew/core/error.h"

namespace dew::objectives::diffusion {

TimeSampling resolve_time_sampling(const std::string& kind, ProcessKind process) {
  if (kind == "auto") {
    switch (process) {
      case ProcessKind::vp: return TimeSampling::uniform;
      case ProcessKind::flow: return TimeSampling::logit_normal;
      case ProcessKind::edm: return TimeSampling::lognormal;
    }
  }
  if (kind == "uniform") return TimeSampling::uniform;
  if (kind == "logit_normal") {
    if (process == ProcessKind::edm) {
      fail("diffusion.time_sampling = logit_normal needs times in [0, 1] (vp or flow); for diffusion.process = edm use lognormal or uniform");
    }
    return TimeSampling::logit_normal;
  }
  if (kind == "lognormal") {
    if (process != ProcessKind::edm) {
      fail("diffusion.time_sampling = lognormal draws EDM sigmas; for diffusion.process = ", to_string(process),
           " use uniform or logit_normal");
    }
    return TimeSampling::lognormal;
  }
  fail("diffusion.time_sampling = \"", kind, "\" is not a time sampling; use auto, uniform, logit_normal or lognormal");
}

std::string to_string(TimeSampling s) {
  switch (s) {
    case TimeSampling::uniform: return "uniform";
    case TimeSampling::logit_normal: return "logit_normal";
    case TimeSampling::lognormal: return "lognormal";
  }
  return "?";
}

at::Tensor sample_times(const NoiseProcess& process, const TimeSamplingConfig& config, std::int64_t count,
                        at::Generator& generator) {
  const TimeSampling how = resolve_time_sampling(config.kind, process.kind());
  const auto cpu = at::TensorOptions().dtype(at::kFloat);
  const auto& pc = process.config();
  switch (process.kind()) {
    case ProcessKind::vp: {
      const std::int64_t T = pc.train_steps;
      if (how == TimeSampling::uniform) return at::randint(0, T, {count}, generator, cpu.dtype(at::kLong)).to(at::kFloat);
      const auto u = (at::randn({count}, generator, cpu) * config.logit_std + config.logit_mean).sigmoid();
      return (u * static_cast<double>(T)).floor().clamp(0, static_cast<double>(T - 1));
    }
    case ProcessKind::flow: {
      // 1 - U[0, 1) lies in (0, 1]: never t = 0, where sigma = 0 and the SNR is infinite.
      const auto t = how == TimeSampling::uniform ? 1.0 - at::rand({count}, generator, cpu)
                                                  : (at::randn({count}, generator, cpu) * config.logit_std + config.logit_mean).sigmoid();
      return process.shift_time(t);
    }
    case ProcessKind::edm: {
      if (how == TimeSampling::lognormal) return (at::randn({count}, generator, cpu) * config.p_std + config.p_mean).exp();
      const double lo = std::log(pc.sigma_min), hi = std::log(pc.sigma_max);
      return (at::rand({count}, generator, cpu) * (hi - lo) + lo).exp();
    }
  }
  fail("sample_times: unknown process");
}

}  // namespace dew::objectives::diffusion
