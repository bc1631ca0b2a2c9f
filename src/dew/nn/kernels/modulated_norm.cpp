#include "dew/nn/kernels/modulated_norm.h"

#include "dew/nn/kernels/cpu_isa.h"
#include "dew/nn/kernels/lanes.h"

namespace dew::nn::kernels {

namespace {

// One row of D: y = (x - mean) * rstd * (1 + scale) + shift.
DEW_KERNEL_BODY void forward_row_loop(const float* __restrict x, const float* __restrict shift, const float* __restrict scale,
                                      float* __restrict y, std::int64_t D, float eps, float* mean_out, float* rstd_out) {
  float mean, rstd;
  row_mean_rstd(x, D, eps, mean, rstd);
  for (std::int64_t d = 0; d < D; ++d) y[d] = (x[d] - mean) * rstd * (1.0f + scale[d]) + shift[d];
  *mean_out = mean;
  *rstd_out = rstd;
}

// One row's backward. With gs = g (1 + scale) and x_hat = (x - mean) rstd:
//   dx = rstd (gs - mean(gs) - x_hat mean(gs x_hat)),  dscale += g x_hat,  dshift += g.
DEW_KERNEL_BODY void backward_row_loop(const float* __restrict x, const float* __restrict g, const float* __restrict scale,
                                       float mean, float rstd, std::int64_t D, float* __restrict dx, float* __restrict dscale,
                                       float* __restrict dshift) {
  const std::int64_t body = D - D % kLanes;
  Lanes a_lanes = {}, c_lanes = {};
  for (std::int64_t d = 0; d < body; d += kLanes) {
    const Lanes x_hat = (DEW_LANES_LOAD(x + d) - mean) * rstd, gs = DEW_LANES_LOAD(g + d) * (1.0f + DEW_LANES_LOAD(scale + d));
    a_lanes += gs;
    c_lanes += gs * x_hat;
  }
  float a = 0, c = 0;
  for (int l = 0; l < kLanes; ++l) a += a_lanes[l], c += c_lanes[l];
  for (std::int64_t d = body; d < D; ++d) {
    const float x_hat = (x[d] - mean) * rstd;
    const float gs = g[d] * (1.0f + scale[d]);
    a += gs;
    c += gs * x_hat;
  }
  for (std::int64_t d = 0; d < D; ++d) {
    const float x_hat = (x[d] - mean) * rstd;
    dscale[d] += g[d] * x_hat;
    dshift[d] += g[d];
  }
  a /= static_cast<float>(D);
  c /= static_cast<float>(D);
  for (std::int64_t d = 0; d < D; ++d) {
    const float x_hat = (x[d] - mean) * rstd;
    dx[d] = rstd * (g[d] * (1.0f + scale[d]) - a - x_hat * c);
  }
}

}  // namespace

void modulated_norm_forward_row(const float* x, const float* shift, const float* scale, float* y, std::int64_t D, float eps,
                                float* mean_out, float* rstd_out) {
  on_cpu_isa<forward_row_loop>(x, shift, scale, y, D, eps, mean_out, rstd_out);
}
void modulated_norm_backward_row(const float* x, const float* g, const float* scale, float mean, float rstd, std::int64_t D,
                                 float* dx, float* dscale, float* dshift) {
  on_cpu_isa<backward_row_loop>(x, g, scale, mean, rstd, D, dx, dscale, dshift);
}

}  // namespace dew::nn::kernels
