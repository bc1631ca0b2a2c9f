#include "dew/training/grad_clip.h"

#include <algorithm>
#include <cmath>

namespace dew::training {

GradientScale gradient_scale(const std::vector<at::Tensor>& params, double max_norm, double pre_scale,
                             const std::function<double(double)>& sum_over_processes) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty() && !sum_over_processes) return {0.0, pre_scale};
  double sum_of_squares = 0;
  if (!grads.empty()) {
    auto norms = at::_foreach_norm(grads, 2);
    for (auto& n : norms) n = n.to(at::kFloat);
    const double local = at::linalg_vector_norm(at::stack(norms), 2).item<double>();
    sum_of_squares = local * local;
  }
  if (sum_over_processes) sum_of_squares = sum_over_processes(sum_of_squares);
  const double norm = std::sqrt(sum_of_squares) * pre_scale;
  GradientScale out{norm, pre_scale};
  // clamped to 1 as PyTorch's clip_grad_norm_ does
  if (max_norm > 0 && std::isfinite(norm)) out.factor = pre_scale * std::min(1.0, max_norm / (norm + 1e-6));
  return out;
}

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm,
                      const std::function<double(double)>& sum_over_processes) {
  const GradientScale scale = gradient_scale(params, max_norm, 1.0, sum_over_processes);
  if (scale.factor != 1.0) {
    at::NoGradGuard no_grad;
    for (const auto& p : params) {
      if (p.grad().defined()) p.grad().mul_(scale.factor);
    }
  }
  return scale.norm;
}

}  // namespace dew::training
