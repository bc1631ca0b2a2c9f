// lms: the linear multistep method of order 4 in k-diffusion's sigma (diffusers' LMSDiscreteScheduler): the
// derivative eps at the last (up to) four levels, extrapolated by the Lagrange polynomial through them and
// integrated over the step. diffusers integrates with scipy's quad; the polynomial has degree <= 3, so a
// 4-point Gauss-Legendre rule is exact. Not for flow: its levels would be sigma/alpha, infinite at t = 1.
#include <array>
#include <deque>

#include "dew/inference/diffusion/solvers/solvers.h"

namespace dew::inference::diffusion {
namespace {

constexpr int kOrder = 4;

// The integral over [level[i], level[i+1]] of the Lagrange basis polynomial that is 1 at level[i - k] and 0
// at level[i - j] for the other j < order.
double lms_coefficient(const std::vector<double>& level, std::size_t i, int order, int k) {
  // 4-point Gauss-Legendre nodes and weights on [-1, 1].
  static constexpr std::array<double, 4> nodes = {-0.8611363115940526, -0.3399810435848563, 0.3399810435848563, 0.8611363115940526};
  static constexpr std::array<double, 4> weights = {0.3478548451374538, 0.6521451548625461, 0.6521451548625461, 0.3478548451374538};
  const double a = level[i], b = level[i + 1];
  double total = 0;
  for (int q = 0; q < 4; ++q) {
    const double tau = 0.5 * (b - a) * nodes[q] + 0.5 * (a + b);
    double prod = 1;
    for (int j = 0; j < order; ++j)
      if (j != k) prod *= (tau - level[i - j]) / (level[i - k] - level[i - j]);
    total += weights[q] * prod;
  }
  return 0.5 * (b - a) * total;
}

class LmsSolver final : public Solver {
 public:
  const char* name() const override { return "lms"; }
  const char* summary() const override { return "linear multistep in sigma, order 4 (diffusers LMSDiscrete)"; }
  std::vector<ProcessKind> processes() const override { return {ProcessKind::vp, ProcessKind::edm}; }

  at::Tensor solve(const SolveContext& c, at::Tensor x) const override {
    const OdeFrame f = ode_frame(c);
    std::deque<at::Tensor> derivatives;  // newest first
    for (std::size_t i = 0; i < c.schedule.t.size(); ++i) {
      derivatives.push_front(f.derivative(c.denoise(x, i)));
      if (derivatives.size() > kOrder) derivatives.pop_back();
      const int order = static_cast<int>(derivatives.size());
      at::Tensor y = x / f.scale[i];
      for (int k = 0; k < order; ++k) y = y + lms_coefficient(f.level, i, order, k) * derivatives[k];
      x = y * f.scale[i + 1];
    }
    return x;
  }
};

}  // namespace

std::unique_ptr<Solver> make_lms_solver() { return std::make_unique<LmsSolver>(); }

}  // namespace dew::inference::diffusion
