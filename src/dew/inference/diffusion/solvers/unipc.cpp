// unipc: UniPC (Zhao et al. 2023) with the B(h) = e^{-h} - 1 variant ("bh2"), order 2, data prediction, as
// diffusers' UniPCMultistepScheduler (solver_order 2, lower_order_final, final_sigmas_type "zero"). Each
// model call first corrects the sample it was made at (UniC, with the new x0), then predicts the next level
// (UniP). With h = lambda_to - lambda_from, phi = e^{-h} - 1 and r = (lambda_older - lambda_from) / h:
//   UniP order 2:  x = sigma_to/sigma_from x - alpha_to phi m0 - 0.5 alpha_to phi (m_older - m0) / r
//   UniC order 1:  x = sigma_to/sigma_from x - alpha_to phi m0 - 0.5 alpha_to phi (m_new - m0)
//   UniC order 2:  rho solves [[1, 1], [r, 1]] rho = b (b from phi_k(h) as diffusers' loop), then
//                  x = ... - alpha_to phi (rho0 (m_older - m0) / r + rho1 (m_new - m0)).
// The corrector's order is the order of the predictor it corrects; orders warm up 1, 2, ... and the last
// predictor (to the clean level) is first order.
#include <deque>

#include "dew/inference/diffusion/solvers/solvers.h"

namespace dew::inference::diffusion {
namespace {

// UniP from level `from` to `from + 1` with the x0s `m` (newest last: m.back() is at `from`).
at::Tensor predict(const Schedule& s, std::size_t from, const at::Tensor& x, const std::deque<at::Tensor>& m, int order) {
  const std::size_t to = from + 1;
  const double phi = exp_neg_h(s, from, to) - 1.0;
  at::Tensor out = (s.sigma[to] / s.sigma[from]) * x - (s.alpha[to] * phi) * m.back();
  if (order == 2) {
    const double h = s.lambda(to) - s.lambda(from);
    const double inv_r = 1.0 / ((s.lambda(from - 1) - s.lambda(from)) / h);  // -0 when lambda_older = -inf
    out = out - (0.5 * s.alpha[to] * phi * inv_r) * (m[m.size() - 2] - m.back());
  }
  return out;
}

// UniC of the sample at level `to` predicted from `x` (at to - 1), with the new x0 `m_new` at `to`; `m`
// holds the older x0s (m.back() at to - 1).
at::Tensor correct(const Schedule& s, std::size_t to, const at::Tensor& x, const std::deque<at::Tensor>& m,
                   const at::Tensor& m_new, int order) {
  const std::size_t from = to - 1;
  const double h = s.lambda(to) - s.lambda(from), hh = -h;
  const double phi = exp_neg_h(s, from, to) - 1.0;  // expm1(hh), = B(h) for bh2
  const at::Tensor& m0 = m.back();
  at::Tensor out = (s.sigma[to] / s.sigma[from]) * x - (s.alpha[to] * phi) * m0;
  if (order == 1) return out - (0.5 * s.alpha[to] * phi) * (m_new - m0);
  // diffusers' b: h_phi_k = phi/hh - 1, b1 = h_phi_k / B; h_phi_k = h_phi_k/hh - 1/2, b2 = 2 h_phi_k / B.
  const double phi_1 = phi / hh - 1.0;
  const double b1 = phi_1 / phi;
  const double b2 = 2.0 * (phi_1 / hh - 0.5) / phi;
  const double r = (s.lambda(from - 1) - s.lambda(from)) / h;
  const double rho0 = (b1 - b2) / (1.0 - r);  // 0 when r = -inf (lambda_older = -inf)
  const double rho1 = b1 - rho0;
  return out - (s.alpha[to] * phi) * ((rho0 / r) * (m[m.size() - 2] - m0) + rho1 * (m_new - m0));
}

class UniPCSolver final : public Solver {
 public:
  const char* name() const override { return "unipc"; }
  const char* summary() const override { return "UniPC bh2 predictor-corrector, order 2 (diffusers UniPCMultistep)"; }
  std::vector<ProcessKind> processes() const override { return {ProcessKind::vp, ProcessKind::edm, ProcessKind::flow}; }

  at::Tensor solve(const SolveContext& c, at::Tensor x) const override {
    const Schedule& s = c.schedule;
    const std::size_t n = s.t.size();
    std::deque<at::Tensor> m;  // the last two x0s, newest last
    at::Tensor last_sample;    // the sample the last prediction started from
    int last_order = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const at::Tensor x0 = c.denoise(x, i).x0;
      if (i > 0) x = correct(s, i, last_sample, m, x0, last_order);
      m.push_back(x0);
      if (m.size() > 2) m.pop_front();
      const int order = static_cast<int>(std::min<std::size_t>({2, n - i, i + 1}));
      last_sample = x;
      x = predict(s, i, x, m, order);
      last_order = order;
    }
    return x;
  }
};

}  // namespace

std::unique_ptr<Solver> make_unipc_solver() { return std::make_unique<UniPCSolver>(); }

}  // namespace dew::inference::diffusion
