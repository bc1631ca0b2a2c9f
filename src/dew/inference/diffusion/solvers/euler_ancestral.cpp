// euler_ancestral: k-diffusion's sample_euler_ancestral (diffusers' EulerAncestralDiscreteScheduler at
// eta = 1): an Euler step down to sigma_down, then fresh noise of standard deviation sigma_up, with
// sigma_up = min(sigma_to, eta sqrt(sigma_to^2 (sigma_from^2 - sigma_to^2) / sigma_from^2)) and
// sigma_down = sqrt(sigma_to^2 - sigma_up^2), in sigma/alpha. Not for flow: sigma/alpha is infinite at
// t = 1, and adding noise in that variable has no flow counterpart in diffusers.
#include <algorithm>
#include <cmath>

#include "dew/core/error.h"
#include "dew/inference/diffusion/solvers/solvers.h"

namespace dew::inference::diffusion {
namespace {

class EulerAncestralSolver final : public Solver {
 public:
  const char* name() const override { return "euler_ancestral"; }
  const char* summary() const override { return "Euler with ancestral noise, eta (default 1) (diffusers EulerAncestralDiscrete)"; }
  std::vector<ProcessKind> processes() const override { return {ProcessKind::vp, ProcessKind::edm}; }
  bool stochastic() const override { return true; }

  at::Tensor solve(const SolveContext& c, at::Tensor x) const override {
    const double eta = c.options.eta.value_or(1.0);
    if (!(eta >= 0) || !std::isfinite(eta)) fail("solver euler_ancestral: eta = ", eta, "; use a number >= 0 (1 = full ancestral noise)");
    const OdeFrame f = ode_frame(c);
    for (std::size_t i = 0; i < c.schedule.t.size(); ++i) {
      const Denoised d = c.denoise(x, i);
      const double from = f.level[i], to = f.level[i + 1];
      const double up = std::min(to, eta * std::sqrt(std::max(to * to * (from * from - to * to) / (from * from), 0.0)));
      const double down = std::sqrt(std::max(to * to - up * up, 0.0));
      at::Tensor y = x / f.scale[i] + (down - from) * f.derivative(d);
      if (up > 0) y = y + up * c.noise(y);
      x = y * f.scale[i + 1];
    }
    return x;
  }
};

}  // namespace

std::unique_ptr<Solver> make_euler_ancestral_solver() { return std::make_unique<EulerAncestralSolver>(); }

}  // namespace dew::inference::diffusion
