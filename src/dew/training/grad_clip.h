#pragma once
// Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_ does it.
#include <ATen/ATen.h>

#include <functional>
#include <vector>

namespace dew::training {

// The L2 norm of all gradients of `params` together (parameters without a gradient are skipped), computed
// in fp32. When max_norm > 0 and the norm exceeds it, every gradient is scaled by
// max_norm / (norm + 1e-6). Returns the norm before clipping (NaN or inf if a gradient is not finite;
// nothing is scaled then, the caller decides).
//
// `sum_over_processes`, when given, turns this process's sum of squares into the job's (sharded training:
// each process holds a part of every gradient, and the norm is the whole gradient's).
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm,
                      const std::function<double(double)>& sum_over_processes = nullptr);

// The same without touching the gradients: the norm of (gradients x pre_scale), and the factor that
// gradients need, pre_scale times the clipping coefficient (1 when the norm is within max_norm, when
// max_norm is 0, or when the norm is not finite). The trainer passes 1 / count as pre_scale and hands the
// factor to the optimizer, which applies it in its own pass.
struct GradientScale {
  double norm = 0, factor = 1;
};
GradientScale gradient_scale(const std::vector<at::Tensor>& params, double max_norm, double pre_scale,
                             const std::function<double(double)>& sum_over_processes = nullptr);

}  // namespace dew::training
