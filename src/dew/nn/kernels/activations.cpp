#include "dew/nn/kernels/activations.h"

#include "dew/nn/kernels/cpu_isa.h"
#include "dew/nn/kernels/fast_exp.h"

namespace dew::nn::kernels {

namespace {

inline float sigmoid(float z) { return 1.0f / (1.0f + fast_exp(-z)); }

// tanh-GELU as x sigmoid(2u), u = c (x + a x^3): 0.5 (1 + tanh(u)) = sigmoid(2u), with no cancellation near 0.
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

DEW_KERNEL_BODY void gelu_tanh_forward_loop(const float* __restrict x, float* __restrict y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v * sigmoid(2.0f * kGeluC * (v + kGeluA * v * v * v));
  }
}

// dy/dx = s + x s (1 - s) 2 du/dx, s = sigmoid(2u), du/dx = c (1 + 3 a x^2).
DEW_KERNEL_BODY void gelu_tanh_backward_loop(const float* __restrict x, const float* __restrict g, float* __restrict dx,
                                             std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float s = sigmoid(2.0f * kGeluC * (v + kGeluA * v * v * v));
    dx[i] = g[i] * (s + v * s * (1.0f - s) * 2.0f * kGeluC * (1.0f + 3.0f * kGeluA * v * v));
  }
}

DEW_KERNEL_BODY void silu_forward_loop(const float* __restrict x, float* __restrict y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] * sigmoid(x[i]);
}

// dy/dx = s (1 + x (1 - s)), s = sigmoid(x).
DEW_KERNEL_BODY void silu_backward_loop(const float* __restrict x, const float* __restrict g, float* __restrict dx,
                                        std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float s = sigmoid(x[i]);
    dx[i] = g[i] * s * (1.0f + x[i] * (1.0f - s));
  }
}

// Gated units y = act(g) u (SwiGLU, GeGLU) in one pass, and their backward in one pass:
//   dg = dy u act'(g),  du = dy act(g).
DEW_KERNEL_BODY void swiglu_forward_loop(const float* __restrict g, const float* __restrict u, float* __restrict y,
                                         std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = g[i] * sigmoid(g[i]) * u[i];
}

DEW_KERNEL_BODY void swiglu_backward_loop(const float* __restrict g, const float* __restrict u, const float* __restrict dy,
                                          float* __restrict dg, float* __restrict du, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float s = sigmoid(g[i]);
    du[i] = dy[i] * (g[i] * s);
    dg[i] = dy[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
  }
}

DEW_KERNEL_BODY void geglu_forward_loop(const float* __restrict g, const float* __restrict u, float* __restrict y,
                                        std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = g[i];
    y[i] = v * sigmoid(2.0f * kGeluC * (v + kGeluA * v * v * v)) * u[i];
  }
}

DEW_KERNEL_BODY void geglu_backward_loop(const float* __restrict g, const float* __restrict u, const float* __restrict dy,
                                         float* __restrict dg, float* __restrict du, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = g[i];
    const float s = sigmoid(2.0f * kGeluC * (v + kGeluA * v * v * v));
    du[i] = dy[i] * (v * s);
    dg[i] = dy[i] * u[i] * (s + v * s * (1.0f - s) * 2.0f * kGeluC * (1.0f + 3.0f * kGeluA * v * v));
  }
}

}  // namespace

void gelu_tanh_forward(const float* x, float* y, std::int64_t n) { on_cpu_isa<gelu_tanh_forward_loop>(x, y, n); }
void gelu_tanh_backward(const float* x, const float* g, float* dx, std::int64_t n) {
  on_cpu_isa<gelu_tanh_backward_loop>(x, g, dx, n);
}
void silu_forward(const float* x, float* y, std::int64_t n) { on_cpu_isa<silu_forward_loop>(x, y, n); }
void silu_backward(const float* x, const float* g, float* dx, std::int64_t n) { on_cpu_isa<silu_backward_loop>(x, g, dx, n); }
void swiglu_forward(const float* g, const float* u, float* y, std::int64_t n) { on_cpu_isa<swiglu_forward_loop>(g, u, y, n); }
void swiglu_backward(const float* g, const float* u, const float* dy, float* dg, float* du, std::int64_t n) {
  on_cpu_isa<swiglu_backward_loop>(g, u, dy, dg, du, n);
}
void geglu_forward(const float* g, const float* u, float* y, std::int64_t n) { on_cpu_isa<geglu_forward_loop>(g, u, y, n); }
void geglu_backward(const float* g, const float* u, const float* dy, float* dg, float* du, std::int64_t n) {
  on_cpu_isa<geglu_backward_loop>(g, u, dy, dg, du, n);
}

}  // namespace dew::nn::kernels
