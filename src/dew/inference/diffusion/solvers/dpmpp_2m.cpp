// dpmpp_2m: DPM-Solver++(2M) (Lu et al. 2022), data prediction, midpoint form, as diffusers'
// DPMSolverMultistepScheduler (algorithm_type "dpmsolver++", solver_order 2, final_sigmas_type "zero").
// With h = lambda_s - lambda_t (lambda = log(alpha/sigma)):
//   first order  x_s = sigma_s/sigma_t x_t - alpha_s (e^{-h} - 1) D0                     (= DDIM)
//   second order adds - 0.5 alpha_s (e^{-h} - 1) D1,  D1 = (D0 - D_prev) h / h_prev
// The first step has no previous x0 and the last (to the clean level) is first order, as diffusers does.
#include "dew/inference/diffusion/solvers/solvers.h"

namespace dew::inference::diffusion {
namespace {

class DpmPP2MSolver final : public Solver {
 public:
  const char* name() const override { return "dpmpp_2m"; }
  const char* summary() const override { return "DPM-Solver++ multistep, order 2 (diffusers DPMSolverMultistep, dpmsolver++)"; }
  std::vector<ProcessKind> processes() const override { return {ProcessKind::vp, ProcessKind::edm, ProcessKind::flow}; }

  at::Tensor solve(const SolveContext& c, at::Tensor x) const override {
    const Schedule& s = c.schedule;
    const std::size_t n = s.t.size();
    at::Tensor previous;  // x0 at level i - 1
    for (std::size_t i = 0; i < n; ++i) {
      const at::Tensor m0 = c.denoise(x, i).x0;
      const double phi = exp_neg_h(s, i, i + 1) - 1.0;  // e^{-h} - 1
      at::Tensor next = (s.sigma[i + 1] / s.sigma[i]) * x - (s.alpha[i + 1] * phi) * m0;
      if (i > 0 && i + 1 < n) {
        const double h = s.lambda(i + 1) - s.lambda(i), h_prev = s.lambda(i) - s.lambda(i - 1);
        const double inv_r = lambda_ratio(h, h_prev);  // 1 / r0
        next = next - (0.5 * s.alpha[i + 1] * phi * inv_r) * (m0 - previous);
      }
      previous = m0;
      x = next;
    }
    return x;
  }
};

}  // namespace

std::unique_ptr<Solver> make_dpmpp_2m_solver() { return std::make_unique<DpmPP2MSolver>(); }

}  // namespace dew::inference::diffusion
