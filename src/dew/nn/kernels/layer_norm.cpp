#include "dew/nn/kernels/layer_norm.h"

#include "dew/nn/kernels/cpu_isa.h"
#include "dew/nn/kernels/lanes.h"

namespace dew::nn::kernels {

namespace {

// Rows [begin, end) of D: y = (x - mean) * rstd * w + b, keeping each row's mean and rstd.
DEW_KERNEL_BODY void forward_rows_loop(const float* __restrict x, const float* __restrict w, const float* __restrict b,
                                       float* __restrict y, std::int64_t begin, std::int64_t end, std::int64_t D, float eps,
                                       float* __restrict mean_out, float* __restrict rstd_out) {
  for (std::int64_t r = begin; r < end; ++r) {
    const float* xr = x + r * D;
    float* yr = y + r * D;
    float mean, rstd;
    row_mean_rstd(xr, D, eps, mean, rstd);
    for (std::int64_t d = 0; d < D; ++d) yr[d] = (xr[d] - mean) * rstd * w[d] + b[d];
    mean_out[r] = mean;
    rstd_out[r] = rstd;
  }
}

// Rows [begin, end)'s backward. With gw = g w and x_hat = (x - mean) rstd:
//   dx = rstd (gw - mean(gw) - x_hat mean(gw x_hat)),  dw += g x_hat,  db += g  (into this thread's dw, db).
DEW_KERNEL_BODY void backward_rows_loop(const float* __restrict x, const float* __restrict g, const float* __restrict w,
                                        const float* __restrict mean, const float* __restrict rstd, std::int64_t begin,
                                        std::int64_t end, std::int64_t D, float* __restrict dx, float* __restrict dw,
                                        float* __restrict db) {
  const std::int64_t body = D - D % kLanes;
  for (std::int64_t r = begin; r < end; ++r) {
    const float *xr = x + r * D, *gr = g + r * D;
    const float m = mean[r], s = rstd[r];
    Lanes a_lanes = {}, c_lanes = {};
    for (std::int64_t d = 0; d < body; d += kLanes) {
      const Lanes x_hat = (DEW_LANES_LOAD(xr + d) - m) * s, gw = DEW_LANES_LOAD(gr + d) * DEW_LANES_LOAD(w + d);
      a_lanes += gw;
      c_lanes += gw * x_hat;
    }
    float a = 0, c = 0;
    for (int l = 0; l < kLanes; ++l) a += a_lanes[l], c += c_lanes[l];
    for (std::int64_t d = body; d < D; ++d) {
      const float x_hat = (xr[d] - m) * s, gw = gr[d] * w[d];
      a += gw;
      c += gw * x_hat;
    }
    a /= static_cast<float>(D);
    c /= static_cast<float>(D);
    float* dxr = dx + r * D;
    for (std::int64_t d = 0; d < D; ++d) {
      const float x_hat = (xr[d] - m) * s;
      dxr[d] = s * (gr[d] * w[d] - a - x_hat * c);
      dw[d] += gr[d] * x_hat;
      db[d] += gr[d];
    }
  }
}

}  // namespace

void layer_norm_forward_rows(const float* x, const float* w, const float* b, float* y, std::int64_t begin, std::int64_t end,
                             std::int64_t D, float eps, float* mean_out, float* rstd_out) {
  on_cpu_isa<forward_rows_loop>(x, w, b, y, begin, end, D, eps, mean_out, rstd_out);
}
void layer_norm_backward_rows(const float* x, const float* g, const float* w, const float* mean, const float* rstd,
                              std::int64_t begin, std::int64_t end, std::int64_t D, float* dx, float* dw, float* db) {
  on_cpu_isa<backward_rows_loop>(x, g, w, mean, rstd, begin, end, D, dx, dw, db);
}

}  // namespace dew::nn::kernels
