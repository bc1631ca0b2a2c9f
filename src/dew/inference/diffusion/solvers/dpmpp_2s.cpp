// dpmpp_2s: DPM-Solver++(2S), the singlestep second-order solver (Lu et al. 2022), deterministic, as
// diffusers' DPMSolverSinglestepScheduler (dpmsolver++, solver_order 2, midpoint, lower_order_final,
// final_sigmas_type "zero"). The grid's levels pair up: a first-order step i-1 -> i lands on the
// intermediate point, then a second-order step i-1 -> i+1 from the same start uses both x0s:
//   x_{i+1} = sigma_{i+1}/sigma_{i-1} x_{i-1} - alpha_{i+1} (e^{-h} - 1) (D0 + 0.5 D1),
//   h = lambda_{i+1} - lambda_{i-1}, D0 = x0_{i-1}, D1 = (x0_i - x0_{i-1}) h / (lambda_i - lambda_{i-1}).
// Orders per model call: 1, 2, 1, 2, ..., and 1 for the last (and the last two when N is even).
#include "dew/inference/diffusion/solvers/solvers.h"

namespace dew::inference::diffusion {
namespace {

// diffusers' get_order_list for solver_order 2, lower_order_final, final_sigmas_type "zero".
std::vector<int> order_list(std::size_t n) {
  std::vector<int> orders;
  const std::size_t pairs = n % 2 == 0 ? n / 2 - 1 : n / 2;
  for (std::size_t k = 0; k < pairs; ++k) orders.insert(orders.end(), {1, 2});
  while (orders.size() < n) orders.push_back(1);
  orders.back() = 1;
  return orders;
}

class DpmPP2SSolver final : public Solver {
 public:
  const char* name() const override { return "dpmpp_2s"; }
  const char* summary() const override { return "DPM-Solver++ singlestep, order 2 (diffusers DPMSolverSinglestep, dpmsolver++)"; }
  std::vector<ProcessKind> processes() const override { return {ProcessKind::vp, ProcessKind::edm, ProcessKind::flow}; }

  at::Tensor solve(const SolveContext& c, at::Tensor x) const override {
    const Schedule& s = c.schedule;
    const std::vector<int> orders = order_list(s.t.size());
    at::Tensor start, start_x0;  // x and x0 at the level the current singlestep began
    for (std::size_t i = 0; i < orders.size(); ++i) {
      const at::Tensor m = c.denoise(x, i).x0;
      if (orders[i] == 1) {
        start = x;
        start_x0 = m;
        x = (s.sigma[i + 1] / s.sigma[i]) * x - (s.alpha[i + 1] * (exp_neg_h(s, i, i + 1) - 1.0)) * m;
      } else {
        const double phi = exp_neg_h(s, i - 1, i + 1) - 1.0;
        const double inv_r = lambda_ratio(s.lambda(i + 1) - s.lambda(i - 1), s.lambda(i) - s.lambda(i - 1));
        x = (s.sigma[i + 1] / s.sigma[i - 1]) * start - (s.alpha[i + 1] * phi) * start_x0 -
            (0.5 * s.alpha[i + 1] * phi * inv_r) * (m - start_x0);
      }
    }
    return x;
  }
};

}  // namespace

std::unique_ptr<Solver> make_dpmpp_2s_solver() { return std::make_unique<DpmPP2SSolver>(); }

}  // namespace dew::inference::diffusion
