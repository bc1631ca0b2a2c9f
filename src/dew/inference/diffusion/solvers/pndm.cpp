// pndm: pseudo linear multistep (PLMS, Liu et al. 2022) as diffusers' PNDMScheduler with skip_prk_steps
// (crowsonkb's PLMS): the noise estimates of the last (up to) four levels combined by the Adams-Bashforth
// weights, applied with a DDIM step. The first step is a Heun-like pair: a DDIM step with eps at t_0, the
// model at its end, then the step again from t_0 with the mean of the two. N + 1 model calls.
// vp only: the method was derived for DDPM's eps-parameterised discrete chain (and combining eps breaks down
// where alpha = 0, flow's t = 1); for edm and flow use lms, dpmpp_2m or unipc.
#include <deque>

#include "dew/inference/diffusion/solvers/solvers.h"

namespace dew::inference::diffusion {
namespace {

// The DDIM step from level i to level j with noise estimate eps (diffusers' _get_prev_sample in alpha, sigma).
at::Tensor ddim_step(const Schedule& s, std::size_t i, std::size_t j, const at::Tensor& x, const at::Tensor& eps) {
  return (s.alpha[j] / s.alpha[i]) * x - (s.alpha[j] * s.sigma[i] / s.alpha[i] - s.sigma[j]) * eps;
}

class PndmSolver final : public Solver {
 public:
  const char* name() const override { return "pndm"; }
  const char* summary() const override { return "pseudo linear multistep, PLMS (diffusers PNDM with skip_prk_steps)"; }
  std::vector<ProcessKind> processes() const override { return {ProcessKind::vp}; }
  std::int64_t evaluations(std::int64_t steps) const override { return steps == 1 ? 1 : steps + 1; }

  at::Tensor solve(const SolveContext& c, at::Tensor x) const override {
    const Schedule& s = c.schedule;
    const std::size_t n = s.t.size();
    const at::Tensor e0 = c.denoise(x, 0).eps;
    const at::Tensor start = x;
    x = ddim_step(s, 0, 1, x, e0);
    if (n == 1) return x;
    x = ddim_step(s, 0, 1, start, 0.5 * (c.denoise(x, 1).eps + e0));
    std::deque<at::Tensor> ets = {e0};  // newest last
    for (std::size_t i = 1; i < n; ++i) {
      ets.push_back(c.denoise(x, i).eps);
      if (ets.size() > 4) ets.pop_front();
      const auto e = [&](std::size_t back) { return ets[ets.size() - back]; };
      at::Tensor eps;
      switch (ets.size()) {
        case 2: eps = (3 * e(1) - e(2)) / 2; break;
        case 3: eps = (23 * e(1) - 16 * e(2) + 5 * e(3)) / 12; break;
        default: eps = (55 * e(1) - 59 * e(2) + 37 * e(3) - 9 * e(4)) / 24; break;
      }
      x = ddim_step(s, i, i + 1, x, eps);
    }
    return x;
  }
};

}  // namespace

std::unique_ptr<Solver> make_pndm_solver() { return std::make_unique<PndmSolver>(); }

}  // namespace dew::inference::diffusion
