// ddpm: ancestral sampling from the DDPM posterior q(x_s | x_t, x0) with the model's x0 (Ho et al. 2020;
// diffusers' DDPMScheduler, variance "fixed_small"). Written for any alpha, sigma, so it serves every process:
// with alpha_ts = alpha_t / alpha_s and sigma_ts^2 = sigma_t^2 - alpha_ts^2 sigma_s^2 (for vp these are
// DDPM's current_alpha and current_beta),
//   mean = alpha_ts sigma_s^2 / sigma_t^2 x_t + alpha_s sigma_ts^2 / sigma_t^2 x0,
//   var  = sigma_ts^2 sigma_s^2 / sigma_t^2.
#include <algorithm>
#include <cmath>

#include "dew/inference/diffusion/solvers/solvers.h"

namespace dew::inference::diffusion {
namespace {

class DdpmSolver final : public Solver {
 public:
  const char* name() const override { return "ddpm"; }
  const char* summary() const override { return "ancestral DDPM posterior steps (diffusers DDPMScheduler)"; }
  std::vector<ProcessKind> processes() const override { return {ProcessKind::vp, ProcessKind::edm, ProcessKind::flow}; }
  bool stochastic() const override { return true; }

  at::Tensor solve(const SolveContext& c, at::Tensor x) const override {
    const Schedule& s = c.schedule;
    const std::size_t n = s.t.size();
    for (std::size_t i = 0; i < n; ++i) {
      const Denoised d = c.denoise(x, i);
      const double a_t = s.alpha[i], s_t = s.sigma[i], a_s = s.alpha[i + 1], s_s = s.sigma[i + 1];
      const double a_ts = a_t / a_s;
      const double var_ts = std::max(s_t * s_t - a_ts * a_ts * s_s * s_s, 0.0);
      x = (a_ts * s_s * s_s / (s_t * s_t)) * x + (a_s * var_ts / (s_t * s_t)) * d.x0;
      const double var = var_ts * s_s * s_s / (s_t * s_t);
      if (i + 1 < n && var > 0) x = x + std::sqrt(var) * c.noise(x);
    }
    return x;
  }
};

}  // namespace

std::unique_ptr<Solver> make_ddpm_solver() { return std::make_unique<DdpmSolver>(); }

}  // namespace dew::inference::diffusion
