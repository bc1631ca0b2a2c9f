// What the solver files share (solvers.h).
#include <cmath>

#include "dew/inference/diffusion/solvers/solvers.h"

namespace dew::inference::diffusion {

OdeFrame ode_frame(const SolveContext& context) {
  const Schedule& s = context.schedule;
  OdeFrame frame;
  frame.flow = context.process.kind() == ProcessKind::flow;
  for (std::size_t i = 0; i < s.alpha.size(); ++i) {
    const double scale = frame.flow ? s.alpha[i] + s.sigma[i] : s.alpha[i];
    frame.scale.push_back(scale);
    frame.level.push_back(s.sigma[i] / scale);
  }
  return frame;
}

double exp_neg_h(const Schedule& s, std::size_t from, std::size_t to) {
  if (s.sigma[to] == 0.0 || s.alpha[from] == 0.0) return 0.0;
  return (s.sigma[to] * s.alpha[from]) / (s.alpha[to] * s.sigma[from]);
}

double lambda_ratio(double h_a, double h_b) {
  if (std::isinf(h_a) && std::isinf(h_b)) return 1.0;
  return h_a / h_b;
}

}  // namespace dew::inference::diffusion
