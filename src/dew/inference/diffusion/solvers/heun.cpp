// heun: Heun's method (Karras et al. 2022, Algorithm 1 without churn) in the frame of solvers.h: an Euler
// step, the derivative at its end, then the step with the mean of both; the last step, to the clean level,
// is plain Euler (the derivative there is undefined). 2N - 1 model calls, as diffusers' HeunDiscreteScheduler
// and FlowMatchHeunDiscreteScheduler.
#include "dew/inference/diffusion/solvers/solvers.h"

namespace dew::inference::diffusion {
namespace {

class HeunSolver final : public Solver {
 public:
  const char* name() const override { return "heun"; }
  const char* summary() const override { return "Heun's second order, 2N-1 model calls (diffusers HeunDiscrete / FlowMatchHeunDiscrete)"; }
  std::vector<ProcessKind> processes() const override { return {ProcessKind::vp, ProcessKind::edm, ProcessKind::flow}; }
  std::int64_t evaluations(std::int64_t steps) const override { return 2 * steps - 1; }

  at::Tensor solve(const SolveContext& c, at::Tensor x) const override {
    const OdeFrame f = ode_frame(c);
    const std::size_t n = c.schedule.t.size();
    for (std::size_t i = 0; i < n; ++i) {
      const at::Tensor d1 = f.derivative(c.denoise(x, i));
      const at::Tensor y = x / f.scale[i];
      const double dl = f.level[i + 1] - f.level[i];
      if (i + 1 == n) {
        x = (y + dl * d1) * f.scale[i + 1];
        break;
      }
      const at::Tensor x1 = (y + dl * d1) * f.scale[i + 1];
      const at::Tensor d2 = f.derivative(c.denoise(x1, i + 1));
      x = (y + dl * 0.5 * (d1 + d2)) * f.scale[i + 1];
    }
    return x;
  }
};

}  // namespace

std::unique_ptr<Solver> make_heun_solver() { return std::make_unique<HeunSolver>(); }

}  // namespace dew::inference::diffusion
