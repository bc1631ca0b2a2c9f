#include "dew/nn/weight_gradient.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "dew/nn/kernels/cpu_isa.h"
#include "dew/nn/kernels/lanes.h"
#include "dew/nn/kernels/weight_gradient.h"

namespace dew::nn {
namespace {

constexpr std::int64_t kMaxOut = 8192;  // see weight_gradient_applies

bool switched_off() {
  static const bool off = [] {
    const char* choice = std::getenv("DEW_CPU_MATMUL");
    return choice != nullptr && std::strcmp(choice, "aten") == 0;
  }();
  return off;
}

}  // namespace

bool weight_gradient_applies(const at::Tensor& dy, const at::Tensor& x) {
  if (!dy.defined() || !x.defined() || dy.dim() != 2 || x.dim() != 2 || dy.size(0) != x.size(0)) return false;
  if (!dy.device().is_cpu() || !x.device().is_cpu() || dy.layout() != at::kStrided || x.layout() != at::kStrided) return false;
  if (dy.scalar_type() != at::kFloat || x.scalar_type() != at::kFloat) return false;
  if (dy.stride(1) != 1 || x.stride(1) != 1 || x.size(1) % kernels::kLanes != 0 || x.size(1) < 1) return false;
  if (dy.size(1) < 1 || dy.size(1) > kMaxOut) return false;
  return kernels::cpu_isa() == kernels::CpuIsa::avx512 && !switched_off();
}

namespace {
// dw (+)= dy^T x with the kernel, and db (+)= dY's column sums when given; dw contiguous [out, in], the shapes
// checked by weight_gradient_applies.
void run(float* dw, const at::Tensor& dy, const at::Tensor& x, bool accumulate, float* db) {
  const std::int64_t K = dy.size(0), out = dy.size(1), in = x.size(1);
  const float *dyp = dy.data_ptr<float>(), *xp = x.data_ptr<float>();
  const std::int64_t ldy = dy.stride(0), ldx = x.stride(0), count = (in + kernels::kWeightGradientPanel - 1) / kernels::kWeightGradientPanel;
  at::parallel_for(0, count, 1, [&](std::int64_t begin, std::int64_t end) {
    kernels::weight_gradient_panels(dyp, ldy, xp, ldx, dw, K, out, in, begin, end, accumulate, db);
  });
}
}  // namespace

at::Tensor weight_gradient(const at::Tensor& dy, const at::Tensor& x, at::Tensor* bias_gradient) {
  if (!weight_gradient_applies(dy, x)) {
    if (bias_gradient != nullptr) *bias_gradient = dy.sum(0);
    return at::mm(dy.t(), x);
  }
  at::Tensor dw = at::empty({dy.size(1), x.size(1)}, x.options());
  if (bias_gradient != nullptr) *bias_gradient = at::empty({dy.size(1)}, x.options());
  if (dy.size(0) == 0) {
    if (bias_gradient != nullptr) bias_gradient->zero_();
    return dw.zero_();
  }
  run(dw.data_ptr<float>(), dy, x, false, bias_gradient != nullptr ? bias_gradient->data_ptr<float>() : nullptr);
  return dw;
}

void add_weight_gradient(at::Tensor& into, const at::Tensor& dy, const at::Tensor& x) {
  const bool fits = into.scalar_type() == at::kFloat && into.is_contiguous() && into.dim() == 2 && into.device().is_cpu() &&
                    dy.dim() == 2 && x.dim() == 2 && into.size(0) == dy.size(1) && into.size(1) == x.size(1);
  if (!fits || !weight_gradient_applies(dy, x)) {
    into.add_(at::mm(dy.t(), x));
    return;
  }
  if (dy.size(0) > 0) run(into.data_ptr<float>(), dy, x, true, nullptr);
}

}  // namespace dew::nn
