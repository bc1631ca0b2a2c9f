// ddim: Song et al. 2021's step x_s = alpha_s x0 + sqrt(sigma_s^2 - std^2) eps + std z, std = eta times the
// DDPM posterior's standard deviation (diffusers' DDIMScheduler). eta = 0 (the default) is deterministic;
// eta = 1 matches DDPM's variance. Written in alpha, sigma, so it serves every process (for flow at eta = 0
// it is the flow ODE's Euler step in t).
#include <algorithm>
#include <cmath>

#include "dew/core/error.h"
#include "dew/inference/diffusion/solvers/solvers.h"

namespace dew::inference::diffusion {
namespace {

class DdimSolver final : public Solver {
 public:
  const char* name() const override { return "ddim"; }
  const char* summary() const override { return "DDIM, eta = 0 deterministic (default) to 1 ancestral (diffusers DDIMScheduler)"; }
  std::vector<ProcessKind> processes() const override { return {ProcessKind::vp, ProcessKind::edm, ProcessKind::flow}; }
  bool stochastic() const override { return true; }

  at::Tensor solve(const SolveContext& c, at::Tensor x) const override {
    const double eta = c.options.eta.value_or(0.0);
    if (!(eta >= 0) || !std::isfinite(eta)) fail("solver ddim: eta = ", eta, "; use a number >= 0 (0 = deterministic, 1 = DDPM noise)");
    const Schedule& s = c.schedule;
    for (std::size_t i = 0; i < s.t.size(); ++i) {
      const Denoised d = c.denoise(x, i);
      const double a_t = s.alpha[i], s_t = s.sigma[i], a_s = s.alpha[i + 1], s_s = s.sigma[i + 1];
      const double a_ts = a_t / a_s;
      const double var = s_s * s_s / (s_t * s_t) * std::max(s_t * s_t - a_ts * a_ts * s_s * s_s, 0.0);
      const double std_dev = eta * std::sqrt(var);
      x = a_s * d.x0 + std::sqrt(std::max(s_s * s_s - std_dev * std_dev, 0.0)) * d.eps;
      if (std_dev > 0) x = x + std_dev * c.noise(x);
    }
    return x;
  }
};

}  // namespace

std::unique_ptr<Solver> make_ddim_solver() { return std::make_unique<DdimSolver>(); }

}  // namespace dew::inference::diffusion
