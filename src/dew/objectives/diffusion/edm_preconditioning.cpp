#include "dew/objectives/diffusion/edm_preconditioning.h"

namespace dew::objectives::diffusion {

EdmScalings edm_scalings(const at::Tensor& sigma, double sigma_data) {
  const double sd2 = sigma_data * sigma_data;
  const auto total = sigma * sigma + sd2;
  return {sd2 / total, sigma * sigma_data * total.rsqrt(), total.rsqrt(), sigma.log() / 4};
}

at::Tensor edm_loss_weight(const at::Tensor& sigma, double sigma_data) {
  const double sd2 = sigma_data * sigma_data;
  return (sigma * sigma + sd2) / (sigma * sigma * sd2);
}

}  // namespace dew::objectives::diffusion
