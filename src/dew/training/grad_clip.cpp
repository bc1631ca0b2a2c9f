#include "dew/training/grad_clip.h"

#include <cmath>

namespace dew::training {

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm,
                      const std::function<double(double)>& sum_over_processes) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty() && !sum_over_processes) return 0.0;
  at::Tensor total;
  if (grads.empty()) {
    total = at::zeros({}, at::kFloat);
  } else {
    auto norms = at::_foreach_norm(grads, 2);
    for (auto& n : norms) n = n.to(at::kFloat);
    total = at::linalg_vector_norm(at::stack(norms), 2);
  }
  if (sum_over_processes) {
    const double local = total.item<double>();
    total = at::full({}, std::sqrt(sum_over_processes(local * local)), total.options());
  }
  const double norm = total.item<double>();
  if (max_norm > 0 && std::isfinite(norm)) {
    // Scale by a device tensor (no host round trip of the coefficient), clamped to 1 as PyTorch does.
    auto coefficient = at::clamp_max(max_norm / (total + 1e-6), 1.0);
    for (auto& g : grads) g.mul_(coefficient.to(g.scalar_type()));
  }
  return norm;
}

}  // namespace dew::training
