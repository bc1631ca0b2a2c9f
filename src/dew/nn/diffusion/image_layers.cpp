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

Conv2dImpl::Conv2dImpl(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride_, std::int64_t padding_)
    : stride(stride_), padding(padding_) {
  weight = register_parameter("weight", at::empty({out, in, kernel, kernel}));
  bias = register_parameter("bias", at::zeros({out}));
}

at::Tensor Conv2dImpl::forward(const at::Tensor& x) const {
  auto type = x.scalar_type();
  return at::conv2d(x, weight.to(type), bias.to(type), {stride, stride}, {padding, padding});
}

GroupNormImpl::GroupNormImpl(std::int64_t groups_, std::int64_t channels, double eps_) : groups(groups_), eps(eps_) {
  weight = register_parameter("weight", at::ones({channels}));
  bias = register_parameter("bias", at::zeros({channels}));
}

at::Tensor GroupNormImpl::forward(const at::Tensor& x) const {
  return at::group_norm(x.to(at::kFloat), groups, weight.to(at::kFloat), bias.to(at::kFloat), eps).to(x.scalar_type());
}

namespace {
std::pair<double, double> fans(const at::Tensor& p) {
  const double out = static_cast<double>(p.size(0));
  return {static_cast<double>(p.numel()) / out, out};
}
}  // namespace

void fill_normal(at::Tensor& p, double std_dev, at::Generator& generator) {
  auto values = at::empty(p.sizes(), at::TensorOptions().dtype(at::kFloat));
  values.normal_(0.0, std_dev, generator);
  p.copy_(values);
}

void fill_uniform(at::Tensor& p, double bound, at::Generator& generator) {
  auto values = at::empty(p.sizes(), at::TensorOptions().dtype(at::kFloat));
  values.uniform_(-bound, bound, generator);
  p.copy_(values);
}

void fill_xavier_uniform(at::Tensor& p, at::Generator& generator) {
  auto [fan_in, fan_out] = fans(p);
  fill_uniform(p, std::sqrt(6.0 / (fan_in + fan_out)), generator);
}

void fill_torch_default(at::Tensor& p, at::Generator& generator) {
  fill_uniform(p, 1.0 / std::sqrt(fans(p).first), generator);
}

bool ends_with(const std::string& name, const std::string& suffix) {
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace dew::nn::diffusion
