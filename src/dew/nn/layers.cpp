#include "dew/nn/layers.h"

#include "dew/core/error.h"
#include "dew/nn/activations.h"
#include "dew/nn/cpu_matmul.h"
#include "dew/nn/layer_norm.h"
#include "dew/nn/quantized/quantized_matrix.h"
#include "dew/nn/rms_norm.h"

namespace dew::nn {

at::Tensor dense(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, const at::Tensor& residual) {
  auto w = weight.scalar_type() == x.scalar_type() ? weight : weight.to(x.scalar_type());
  auto b = !bias.defined() || bias.scalar_type() == x.scalar_type() ? bias : bias.to(x.scalar_type());
  return residual.defined() ? cpu_linear_plus(x, w, b, residual) : cpu_linear(x, w, b);
}

LinearImpl::LinearImpl(std::int64_t in, std::int64_t out, bool with_bias, c10::ScalarType param_dtype) {
  weight = register_parameter("weight", at::empty({out, in}, at::TensorOptions().dtype(param_dtype)));
  if (with_bias) bias = register_parameter("bias", at::zeros({out}, at::TensorOptions().dtype(param_dtype)));
}

at::Tensor LinearImpl::forward(const at::Tensor& x) const { return forward_plus(x, {}); }

at::Tensor LinearImpl::forward_plus(const at::Tensor& x, const at::Tensor& residual) const {
  at::Tensor y;
  if (quantized) {
    if (is_training() || (x.requires_grad() && at::GradMode::is_enabled()))
      dew::fail(quantized->name().empty() ? std::string("a linear layer") : "'" + quantized->name() + "'",
                " holds quantized weights, which are for inference only; load the model with float weights "
                "(--dtype float32) to train or differentiate it");
    y = quantized->linear(x);
    if (bias.defined()) y = y + bias.to(y.scalar_type());
    y = y.to(x.scalar_type());
    if (residual.defined()) y = residual + y;
  } else {
    y = dense(x, weight, bias, residual);
  }
  if (!lora_A || !lora_active) return y;
  auto dropped = lora_dropout > 0.0 && is_training() ? at::dropout(x, lora_dropout, /*train=*/true) : x;
  const auto h = dense(dropped, lora_A->weight);  // [..., rank]
  const at::Tensor b = lora_rows.defined() ? lora_B->weight.index_select(0, lora_rows.to(lora_B->weight.device())) : lora_B->weight;
  // y + lora_scale * h B^T as one GEMM accumulating into y (beta 1, alpha lora_scale): no separate passes over
  // [tokens, out] to scale the delta and add it, forward or backward (the scale lands on the rank-wide factors).
  const auto rank = h.size(-1), out = y.size(-1);
  return at::addmm(y.reshape({-1, out}), h.reshape({-1, rank}), (b.scalar_type() == h.scalar_type() ? b : b.to(h.scalar_type())).t(), 1,
                   lora_scale)
      .view(y.sizes());
}

RMSNormImpl::RMSNormImpl(std::int64_t features, double eps_, c10::ScalarType param_dtype, double weight_offset_)
    : eps(eps_), weight_offset(weight_offset_) {
  // Initialised to the identity: (offset + weight) = 1.
  weight = register_parameter("weight", at::full({features}, 1.0 - weight_offset, at::TensorOptions().dtype(param_dtype)));
}

at::Tensor RMSNormImpl::forward(const at::Tensor& x) const { return rms_norm(x, weight, eps, weight_offset); }

NormImpl::NormImpl(std::int64_t features, const CausalTransformerConfig& config, c10::ScalarType param_dtype)
    : eps(config.norm_eps), weight_offset(config.norm_weight_offset) {
  const auto options = at::TensorOptions().dtype(param_dtype);
  weight = register_parameter("weight", at::full({features}, 1.0 - weight_offset, options));  // the identity
  if (config.norm == "layernorm") bias = register_parameter("bias", at::zeros({features}, options));
}

at::Tensor NormImpl::forward(const at::Tensor& x) const {
  if (!bias.defined()) return rms_norm(x, weight, eps, weight_offset);
  auto y = affine_layer_norm(x.to(at::kFloat), weight.to(at::kFloat), bias.to(at::kFloat), eps);
  return y.scalar_type() == x.scalar_type() ? y : y.to(x.scalar_type());
}

bool gated_mlp(const std::string& kind) { return kind == "swiglu" || kind == "geglu"; }

MlpImpl::MlpImpl(const CausalTransformerConfig& config, c10::ScalarType param_dtype) : kind(config.mlp) {
  auto d = config.emb_features, h = config.resolved_mlp_features();
  bool bias = config.mlp_bias;
  if (gated_mlp(kind)) gate_proj = register_module("gate_proj", Linear(d, h, bias, param_dtype));
  up_proj = register_module("up_proj", Linear(d, h, bias, param_dtype));
  down_proj = register_module("down_proj", Linear(h, d, bias, param_dtype));
}

at::Tensor MlpImpl::forward(const at::Tensor& x) const {
  if (kind == "swiglu") return down_proj->forward(swiglu(gate_proj->forward(x), up_proj->forward(x)));
  if (kind == "geglu") return down_proj->forward(geglu(gate_proj->forward(x), up_proj->forward(x)));
  if (kind == "gelu_erf") return down_proj->forward(at::gelu(up_proj->forward(x)));
  return down_proj->forward(dew::nn::gelu_tanh(up_proj->forward(x)));
}

}  // namespace dew::nn
