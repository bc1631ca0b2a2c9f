#pragma once
// The activations' elementwise loops over n floats (nn/activations.h says what they compute and how
// exactly): each as x * sigmoid(z) with one fast_exp per element, the backward recomputing the sigmoid
// from the saved input. Gated units y = act(g) u, and their backward dg = dy u act'(g), du = dy act(g).
#include <cstdint>

namespace dew::nn::kernels {

void gelu_tanh_forward(const float* x, float* y, std::int64_t n);
void gelu_tanh_backward(const float* x, const float* g, float* dx, std::int64_t n);
void silu_forward(const float* x, float* y, std::int64_t n);
void silu_backward(const float* x, const float* g, float* dx, std::int64_t n);
void swiglu_forward(const float* g, const float* u, float* y, std::int64_t n);
void swiglu_backward(const float* g, const float* u, const float* dy, float* dg, float* du, std::int64_t n);
void geglu_forward(const float* g, const float* u, float* y, std::int64_t n);
void geglu_backward(const float* g, const float* u, const float* dy, float* dg, float* du, std::int64_t n);

}  // namespace dew::nn::kernels
