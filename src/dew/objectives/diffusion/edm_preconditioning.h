#pragma once
// EDM's preconditioning (Karras et al. 2022, table 1): the denoiser is
//   D(x; sigma) = c_skip(sigma) * x + c_out(sigma) * F(c_in(sigma) * x; c_noise(sigma))
// with F the network, so that F's input and its training target both have unit variance at every sigma:
//   c_skip = sd^2 / (sigma^2 + sd^2)   c_out = sigma * sd / sqrt(sigma^2 + sd^2)
//   c_in = 1 / sqrt(sigma^2 + sd^2)    c_noise = ln(sigma) / 4
// and the loss weight lambda(sigma) = (sigma^2 + sd^2) / (sigma * sd)^2 = 1 / c_out^2 makes the weighted
// error of D the plain error of F against its preconditioned target (x0 - c_skip x) / c_out.
#include <ATen/ATen.h>

namespace dew::objectives::diffusion {

struct EdmScalings {
  at::Tensor c_skip, c_out, c_in, c_noise;  // each the shape of sigma
};

// sigma: any shape, floating point; the scalings come in sigma's dtype and device.
EdmScalings edm_scalings(const at::Tensor& sigma, double sigma_data);
// EDM's loss weight lambda(sigma) = (sigma^2 + sd^2) / (sigma * sd)^2.
at::Tensor edm_loss_weight(const at::Tensor& sigma, double sigma_data);

}  // namespace dew::objectives::diffusion
