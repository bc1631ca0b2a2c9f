#include "dew/nn/cpu_matmul.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#include "dew/nn/weight_gradient.h"

namespace dew::nn {
namespace {

// libtorch registers oneDNN's inner product for dense float32 CPU tensors as the operator
// mkldnn::_linear_pointwise(X, W, B?, attr, scalars, algorithm) = X W^T (+ B), W [out, in] with any strides
// (a transposed view is read in place). Its C++ symbol is not in libtorch's headers, so it is looked up
// through the dispatcher; a libtorch built without oneDNN simply lacks it.
using LinearPointwise = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, c10::string_view,
                                   c10::List<std::optional<c10::Scalar>>, std::optional<c10::string_view>);

const std::optional<c10::TypedOperatorHandle<LinearPointwise>>& linear_pointwise() {
  static const auto op = []() -> std::optional<c10::TypedOperatorHandle<LinearPointwise>> {
    const char* choice = std::getenv("DEW_CPU_MATMUL");
    if (choice && std::strcmp(choice, "aten") == 0) return std::nullopt;
    auto handle = c10::Dispatcher::singleton().findSchema({"mkldnn::_linear_pointwise", ""});
    if (!handle || !handle->hasKernelForDispatchKey(c10::DispatchKey::CPU)) return std::nullopt;
    return handle->typed<LinearPointwise>();
  }();
  return op;
}

// mkldnn::_linear_pointwise.binary(X, other, W, B?, "add") = X W^T (+ B) + other: the addition applied as the
// product's results are written, other [rows, out] contiguous.
using LinearPointwiseBinary = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                         c10::string_view);

const std::optional<c10::TypedOperatorHandle<LinearPointwiseBinary>>& linear_pointwise_binary() {
  static const auto op = []() -> std::optional<c10::TypedOperatorHandle<LinearPointwiseBinary>> {
    if (!linear_pointwise()) return std::nullopt;  // the same switch and the same build
    auto handle = c10::Dispatcher::singleton().findSchema({"mkldnn::_linear_pointwise", "binary"});
    if (!handle || !handle->hasKernelForDispatchKey(c10::DispatchKey::CPU)) return std::nullopt;
    return handle->typed<LinearPointwiseBinary>();
  }();
  return op;
}

// Where oneDNN wins, from bench/cpu_matmul_bench.cpp's small shapes (2 Zen 4 cores): from 256 rows up
// (1.2-1.7x), and for a few rows against a large weight, a decode step's matrix-vector products (1.8-2.9x);
// in between (16-128 rows) MKL's small-matrix kernels are up to 2x faster, and below ~2 M multiply-adds
// oneDNN's per-call set-up (descriptors, the primitive-cache lookup) costs more than its kernels save.
constexpr std::int64_t kMinRows = 256, kMaxVectorRows = 8;
constexpr double kMinMultiplyAdds = 2.0 * 1024 * 1024, kMinVectorWeight = 256.0 * 1024;

bool plain_or_transposed(const at::Tensor& m) { return m.is_contiguous() || m.t().is_contiguous(); }

// a [n, k] b^T through oneDNN; a is made contiguous (the op needs rows), b read as it lies.
at::Tensor onednn_nt(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias) {
  return linear_pointwise()->call(a, b, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt, "none",
                                  c10::List<std::optional<c10::Scalar>>(), std::nullopt);
}

at::Tensor product(const at::Tensor& a2d, const at::Tensor& b, const at::Tensor& bias) {
  if (uses_onednn(a2d, b)) return onednn_nt(a2d, plain_or_transposed(b) ? b : b.contiguous(), bias);
  return bias.defined() ? at::addmm(bias, a2d, b.t()) : at::mm(a2d, b.t());
}

// x [rows, in] W^T (+ bias) (+ residual [rows, out], contiguous) in one oneDNN call.
at::Tensor onednn_nt_plus(const at::Tensor& x2d, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& residual) {
  if (!residual.defined()) return onednn_nt(x2d, weight, bias);
  return linear_pointwise_binary()->call(x2d, residual, weight, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt, "add");
}

struct OneDnnLinear : public torch::autograd::Function<OneDnnLinear> {
  // bias and residual are optional rather than possibly undefined: autograd's bookkeeping needs every tensor
  // input defined. With a residual the output is residual + x W^T (+ b), whose gradient is the output's.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& residual) {
    const auto x2d = x.reshape({-1, x.size(-1)});
    // x is kept only for the weight's gradient: a frozen weight (LoRA's base) holds no activations here.
    ctx->save_for_backward({weight.requires_grad() ? x2d : at::Tensor(), weight});
    ctx->saved_data["has_bias"] = bias.has_value();
    ctx->saved_data["has_residual"] = residual.has_value();
    auto sizes = x.sizes().vec();
    sizes.back() = weight.size(0);
    auto y = onednn_nt_plus(x2d, weight, bias.value_or(at::Tensor()),
                            residual.has_value() ? residual->reshape({-1, weight.size(0)}) : at::Tensor());
    return y.view(sizes);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const auto& x2d = saved[0];
    const auto& weight = saved[1];
    const auto& dy = grad_outputs[0];
    const auto dy2d = dy.reshape({-1, dy.size(-1)});
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {
      auto sizes = dy.sizes().vec();
      sizes.back() = weight.size(1);
      dx = product(dy2d, weight.t(), {}).view(sizes);  // dY W = dY (W^T)^T, W^T read in place
    }
    const bool bias_needed = ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2);
    if (ctx->needs_input_grad(1)) dw = weight_gradient(dy2d, x2d, bias_needed ? &db : nullptr);  // db on the way
    if (bias_needed && !db.defined()) db = dy2d.sum(0);
    // needs_input_grad counts the tensor inputs given (an absent bias takes no place); the list returned
    // has a place for every argument.
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    const bool residual_needed = ctx->saved_data["has_residual"].toBool() && ctx->needs_input_grad(has_bias ? 3 : 2);
    return {dx, dw, db, residual_needed ? dy : at::Tensor()};
  }
};

}  // namespace

bool uses_onednn(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined() || a.dim() < 2 || b.dim() != 2) return false;
  if (!a.device().is_cpu() || !b.device().is_cpu() || a.layout() != at::kStrided || b.layout() != at::kStrided) return false;
  if (a.scalar_type() != at::kFloat || b.scalar_type() != at::kFloat) return false;
  const std::int64_t rows = a.numel() / std::max<std::int64_t>(a.size(-1), 1);
  const double weight = static_cast<double>(b.size(0)) * static_cast<double>(b.size(1));
  const bool worth_it = rows >= kMinRows ? static_cast<double>(rows) * weight >= kMinMultiplyAdds
                                         : rows >= 1 && rows <= kMaxVectorRows && weight >= kMinVectorWeight;
  return worth_it && linear_pointwise().has_value();
}

at::Tensor mm_transposed(const at::Tensor& a, const at::Tensor& b) {
  if (at::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad())) return at::linear(a, b);  // autograd's
  if (a.dim() == 2) return product(a, b, {});
  auto sizes = a.sizes().vec();
  sizes.back() = b.size(0);
  return product(a.reshape({-1, a.size(-1)}), b, {}).view(sizes);
}

at::Tensor onednn_mm_transposed(const at::Tensor& a, const at::Tensor& b) {
  if (!linear_pointwise()) return {};
  return onednn_nt(a, plain_or_transposed(b) ? b : b.contiguous(), {});
}

namespace {
// cpu_linear and cpu_linear_plus: with `residual` defined, residual + x W^T (+ b).
at::Tensor linear_maybe_plus(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& residual) {
  const bool onednn = uses_onednn(x, weight) && plain_or_transposed(weight) &&
                      (!bias.defined() || (bias.scalar_type() == at::kFloat && bias.is_contiguous()));
  const bool fused_residual = residual.defined() && onednn && linear_pointwise_binary().has_value() &&
                              residual.scalar_type() == at::kFloat && residual.is_contiguous() && residual.device().is_cpu() &&
                              residual.dim() == x.dim() && residual.sizes().slice(0, x.dim() - 1) == x.sizes().slice(0, x.dim() - 1) &&
                              residual.size(-1) == weight.size(0);
  if (residual.defined() && !fused_residual) return residual + linear_maybe_plus(x, weight, bias, {});
  if (!onednn) return bias.defined() ? at::linear(x, weight, bias) : at::linear(x, weight);
  const bool grad = at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad() ||
                                                   (bias.defined() && bias.requires_grad()) || (residual.defined() && residual.requires_grad()));
  if (!grad) {
    auto sizes = x.sizes().vec();
    sizes.back() = weight.size(0);
    return onednn_nt_plus(x.reshape({-1, x.size(-1)}), weight, bias, residual.defined() ? residual.view({-1, weight.size(0)}) : at::Tensor())
        .view(sizes);
  }
  auto optional = [](const at::Tensor& t) { return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt; };
  return OneDnnLinear::apply(x, weight, optional(bias), optional(residual));
}
}  // namespace

at::Tensor cpu_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return linear_maybe_plus(x, weight, bias, {});
}

at::Tensor cpu_linear_plus(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& residual) {
  return linear_maybe_plus(x, weight, bias, residual);
}

at::Tensor cpu_linear_gelu_tanh_no_grad(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad()))) return {};
  const bool onednn = uses_onednn(x, weight) && plain_or_transposed(weight) && x.is_contiguous() &&
                      (!bias.defined() || (bias.scalar_type() == at::kFloat && bias.is_contiguous()));
  if (!onednn) return {};
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  return linear_pointwise()
      ->call(x.reshape({-1, x.size(-1)}), weight, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt, "gelu",
             c10::List<std::optional<c10::Scalar>>(), "tanh")
      .view(sizes);
}

}  // namespace dew::nn
