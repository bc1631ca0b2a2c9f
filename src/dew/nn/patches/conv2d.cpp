#include "dew/nn/patches/conv2d.h"

namespace dew::nn {

Conv2dImpl::Conv2dImpl(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride_, std::int64_t padding_)
    : stride(stride_), padding(padding_) {
  weight = register_parameter("weight", at::empty({out, in, kernel, kernel}));
  bias = register_parameter("bias", at::zeros({out}));
}

at::Tensor Conv2dImpl::forward(const at::Tensor& x) const {
  auto type = x.scalar_type();
  return at::conv2d(x, weight.to(type), bias.to(type), {stride, stride}, {padding, padding});
}

}  // namespace dew::nn
