#pragma once
// The settings of one sampling run, as a config section (e.g. "sample" in a diffusion run's config, or
// `dew sample`'s flags): solver, spacing, steps, eta, karras rho and guidance.
#include <cstdint>
#include <optional>
#include <string>

#include "dew/inference/diffusion/guidance.h"
#include "dew/inference/diffusion/solver.h"

namespace dew::inference::diffusion {

struct SamplerConfig {
  std::string solver = "euler";
  std::string spacing;            // "" = default_spacing(process)
  std::int64_t steps = 50;
  std::optional<double> eta;      // ddim (default 0) and euler_ancestral (default 1)
  double rho = 7.0;               // karras spacing exponent
  Guidance guidance;

  template <class V>
  void fields(V& v) {
    v("solver", solver, "diffusion solver: ddpm, ddim, euler, euler_ancestral, heun, dpmpp_2m, dpmpp_2s, unipc, lms, pndm");
    v("spacing", spacing, "timestep spacing: linspace (uniform), leading, trailing, karras; empty = the process's default");
    v("steps", steps, "solver steps (model times); heun calls the model 2N-1 times, pndm N+1");
    v("eta", eta, "noise of ddim (default 0) and euler_ancestral (default 1)");
    v("rho", rho, "exponent of the karras spacing");
    v("guidance", guidance);
  }
  // Refuses an unknown solver or spacing, a solver that does not support `kind`, steps < 1, a bad eta or rho,
  // and bad guidance, naming `prefix`.field and the value.
  void validate(ProcessKind kind, const std::string& prefix = "sample") const;
  Spacing spacing_for(ProcessKind kind) const;
  SolverOptions options() const { return SolverOptions{eta}; }
};

// sample() with these settings (the denoiser already applies guidance: see guided_denoiser).
at::Tensor sample(const NoiseProcess& process, const SamplerConfig& config, const Denoiser& denoiser,
                  const at::Tensor& x_T, at::Generator generator);

}  // namespace dew::inference::diffusion
