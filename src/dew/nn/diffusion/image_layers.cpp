#include "dew/nn/diffusion/image_layers.h"

#include <cmath>

namespace dew::nn::diffusion {

at::Tensor timestep_embedding(const at::Tensor& time, std::int64_t features, double max_period) {
  const std::int64_t half = features / 2;
  auto doubles = at::TensorOptions().dtype(at::kDouble).device(time.device());
  auto freqs = at::exp(at::arange(half, doubles) * (-std::log(max_period) / static_cast<double>(half)));
  auto args = time.to(at::kDouble).reshape({-1, 1}) * freqs.unsqueeze(0);
  auto embedding = at::cat({at::cos(args), at::sin(args)}, 1);
  if (features % 2 == 1) embedding = at::cat({embedding, at::zeros({embedding.size(0), 1}, doubles)}, 1);
  return embedding.to(at::kFloat);
}

at::Tensor modulate(const at::Tensor& x, const at::Tensor& shift, const at::Tensor& scale) {
  return at::addcmul(shift.unsqueeze(1), x, scale.unsqueeze(1) + 1);  // one pass over x
}

at::Tensor plain_layer_norm(const at::Tensor& x, double eps) {
  return at::layer_norm(x.to(at::kFloat), {x.size(-1)}, {}, {}, eps).to(x.scalar_type());
}

GroupNormImpl::GroupNormImpl(std::int64_t groups_, std::int64_t channels, double eps_) : groups(groups_), eps(eps_) {
  weight = register_parameter("weight", at::ones({channels}));
  bias = register_parameter("bias", at::zeros({channels}));
}

at::Tensor GroupNormImpl::forward(const at::Tensor& x) const {
  return at::group_norm(x.to(at::kFloat), groups, weight.to(at::kFloat), bias.to(at::kFloat), eps).to(x.scalar_type());
}

}  // namespace dew::nn::diffusion
