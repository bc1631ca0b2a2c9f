// Sampling settings (sampler_config.h).
#include "dew/inference/diffusion/sampler_config.h"

#include <cmath>

#include "dew/core/error.h"

namespace dew::inference::diffusion {

namespace {
// Re-throws a lower layer's refusal with the config field in front.
template <class F>
decltype(auto) with_field(const std::string& field, F&& body) {
  try {
    return body();
  } catch (const Error& e) {
    fail(field, ": ", e.what());
  }
}
}  // namespace

Spacing SamplerConfig::spacing_for(ProcessKind kind) const {
  return spacing.empty() ? default_spacing(kind) : parse_spacing(spacing);
}

void SamplerConfig::validate(ProcessKind kind, const std::string& prefix) const {
  const Solver& chosen = with_field(prefix + ".solver", [&]() -> const Solver& { return find_solver(solver); });
  with_field(prefix + ".solver", [&] { check_supports(chosen, kind); });
  with_field(prefix + ".spacing", [&] { return spacing_for(kind); });
  if (steps < 1) fail(prefix, ".steps = ", steps, "; use at least 1");
  if (eta && (!(*eta >= 0) || !std::isfinite(*eta))) fail(prefix, ".eta = ", *eta, "; use a number >= 0");
  if (!(rho > 0) || !std::isfinite(rho)) fail(prefix, ".rho = ", rho, "; use a positive number (7 is usual)");
  guidance.validate(prefix + ".guidance");
}

at::Tensor sample(const NoiseProcess& process, const SamplerConfig& config, const Denoiser& denoiser,
                  const at::Tensor& x_T, at::Generator generator) {
  config.validate(process.kind());
  const Solver& solver = find_solver(config.solver);
  const Schedule schedule = make_schedule(process, config.spacing_for(process.kind()), config.steps, config.rho);
  return sample(process, solver, schedule, denoiser, x_T, generator_noise(std::move(generator)), config.options());
}

}  // namespace dew::inference::diffusion
