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

}  // namespace dew::training
