#include "dew/nn/seeded_init.h"

#include <cmath>
#include <utility>

namespace dew::nn {

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

}  // namespace dew::nn
