#include "dew/nn/kernels/gated_residual.h"

#include "dew/nn/kernels/cpu_isa.h"

namespace dew::nn::kernels {

namespace {

// One image: out[n] = x[n] + gate * y[n] for its N rows of D.
DEW_KERNEL_BODY void forward_image_loop(const float* __restrict x, const float* __restrict gate, const float* __restrict y,
                                        float* __restrict out, std::int64_t N, std::int64_t D) {
  for (std::int64_t n = 0; n < N; ++n) {
    const float *xr = x + n * D, *yr = y + n * D;
    float* o = out + n * D;
    for (std::int64_t d = 0; d < D; ++d) o[d] = xr[d] + gate[d] * yr[d];
  }
}

// One image's backward from the output's gradient g: dy[n] = g[n] * gate, dgate = sum over n of g[n] * y[n]
// (in token order).
DEW_KERNEL_BODY void backward_image_loop(const float* __restrict g, const float* __restrict gate, const float* __restrict y,
                                         float* __restrict dy, float* __restrict dgate, std::int64_t N, std::int64_t D) {
  for (std::int64_t d = 0; d < D; ++d) dgate[d] = 0.0f;
  for (std::int64_t n = 0; n < N; ++n) {
    const float *gr = g + n * D, *yr = y + n * D;
    float* dyr = dy + n * D;
    for (std::int64_t d = 0; d < D; ++d) {
      dyr[d] = gr[d] * gate[d];
      dgate[d] += gr[d] * yr[d];
    }
  }
}

}  // namespace

void gated_residual_forward_image(const float* x, const float* gate, const float* y, float* out, std::int64_t N, std::int64_t D) {
  on_cpu_isa<forward_image_loop>(x, gate, y, out, N, D);
}
void gated_residual_backward_image(const float* g, const float* gate, const float* y, float* dy, float* dgate, std::int64_t N,
                                   std::int64_t D) {
  on_cpu_isa<backward_image_loop>(g, gate, y, dy, dgate, N, D);
}

}  // namespace dew::nn::kernels
