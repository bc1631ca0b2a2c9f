// euler: Euler's method on the probability-flow ODE in the frame of solvers.h (k-diffusion's sigma for vp
// and edm, as diffusers' EulerDiscreteScheduler with s_churn = 0; t for flow, as FlowMatchEulerDiscreteScheduler).
#include "dew/inference/diffusion/solvers/solvers.h"

namespace dew::inference::diffusion {
namespace {

class EulerSolver final : public Solver {
 public:
  const char* name() const override { return "euler"; }
  const char* summary() const override { return "Euler on the probability-flow ODE (diffusers EulerDiscrete / FlowMatchEulerDiscrete)"; }
  std::vector<ProcessKind> processes() const override { return {ProcessKind::vp, ProcessKind::edm, ProcessKind::flow}; }

  at::Tensor solve(const SolveContext& c, at::Tensor x) const override {
    const OdeFrame f = ode_frame(c);
    for (std::size_t i = 0; i < c.schedule.t.size(); ++i) {
      const Denoised d = c.denoise(x, i);
      const at::Tensor y = x / f.scale[i] + (f.level[i + 1] - f.level[i]) * f.derivative(d);
      x = y * f.scale[i + 1];
    }
    return x;
  }
};

}  // namespace

std::unique_ptr<Solver> make_euler_solver() { return std::make_unique<EulerSolver>(); }

}  // namespace dew::inference::diffusion
