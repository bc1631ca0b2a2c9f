// nn/kernels' one dispatch rule (cpu_isa.h): the level it detects is the CPU's, forcing a narrower one is
// obeyed by every kernel, and every compiled copy -- the x86-64 baseline included, which no test would
// run on an AVX-512 machine otherwise -- computes what the detected copy computes.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dew/core/error.h"
#include "dew/nn/activations.h"
#include "dew/nn/diffusion/gated_residual.h"
#include "dew/nn/diffusion/modulated_norm.h"
#include "dew/nn/kernels/cpu_isa.h"
#include "dew/nn/layer_norm.h"
#include "dew/nn/multi_tensor.h"
#include "dew/nn/quantized/quantized_matrix.h"
#include "dew/nn/rms_norm.h"
#include "dew/nn/rotary.h"
#include "dew/nn/short_attention.h"
#include "dew/nn/weight_gradient.h"
#include "dew/training/optimizer.h"

namespace {

using dew::nn::kernels::CpuIsa;

// Restores the detected level however a test ends.
struct ForcedIsa {
  explicit ForcedIsa(CpuIsa isa) { dew::nn::kernels::force_cpu_isa(isa); }
  ~ForcedIsa() { dew::nn::kernels::force_cpu_isa(std::nullopt); }
};

std::vector<CpuIsa> runnable_levels() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : {CpuIsa::baseline, CpuIsa::avx2, CpuIsa::avx512}) {
    if (static_cast<int>(isa) <= static_cast<int>(dew::nn::kernels::detected_cpu_isa())) out.push_back(isa);
  }
  return out;
}

TEST(KernelsCpuIsa, DetectsTheCpusLevelAndRefusesAWiderOne) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  __builtin_cpu_init();
  const CpuIsa expected = __builtin_cpu_supports("x86-64-v4")   ? CpuIsa::avx512
                          : __builtin_cpu_supports("x86-64-v3") ? CpuIsa::avx2
                                                                : CpuIsa::baseline;
  EXPECT_EQ(dew::nn::kernels::detected_cpu_isa(), expected);
  EXPECT_EQ(dew::nn::kernels::cpu_has_avx512_vnni(), expected == CpuIsa::avx512 && __builtin_cpu_supports("avx512vnni") != 0);
#endif
  EXPECT_EQ(dew::nn::kernels::cpu_isa(), dew::nn::kernels::detected_cpu_isa());
  if (dew::nn::kernels::detected_cpu_isa() != CpuIsa::avx512) {
    EXPECT_THROW(dew::nn::kernels::force_cpu_isa(CpuIsa::avx512), dew::Error);
  }
  {
    ForcedIsa forced(CpuIsa::baseline);
    EXPECT_EQ(dew::nn::kernels::cpu_isa(), CpuIsa::baseline);
    // The quantized kernels follow the same level.
    EXPECT_EQ(dew::nn::active_quant_kernels(), dew::nn::QuantKernels::scalar);
  }
  EXPECT_EQ(dew::nn::kernels::cpu_isa(), dew::nn::kernels::detected_cpu_isa());
}

TEST(KernelsCpuIsa, TheWeightGradientKernelRunsOnlyAtAvx512) {
  const auto dy = at::randn({32, 48}), x = at::randn({32, 64});
  for (CpuIsa isa : runnable_levels()) {
    ForcedIsa forced(isa);
    if (isa != CpuIsa::avx512) {
      EXPECT_FALSE(dew::nn::weight_gradient_applies(dy, x)) << dew::nn::kernels::cpu_isa_name(isa);
    }
    // Its kernel or at::mm: the same product either way (sums of 32 terms of O(1): a few float32 ulps each).
    EXPECT_TRUE(at::allclose(dew::nn::weight_gradient(dy, x), at::mm(dy.t(), x), 1e-5, 1e-4));
  }
}

// Each op's outputs and input gradients, computed through the fused CPU kernels.
std::vector<at::Tensor> run_ops() {
  at::manual_seed(7);
  std::vector<at::Tensor> results;
  auto with_grads = [&](const std::vector<at::Tensor>& inputs, const std::function<at::Tensor()>& op) {
    const at::Tensor y = op();
    y.backward(at::cos(at::arange(y.numel(), at::kFloat)).view(y.sizes()));  // a gradient that is not all ones
    results.push_back(y.detach());
    for (const auto& t : inputs) results.push_back(t.grad().clone());
  };
  // Row lengths that are not a multiple of 16 exercise the scalar tails too.
  for (std::int64_t D : {64, 37}) {
    auto x = at::randn({6, D}).requires_grad_(), w = at::randn({D}).requires_grad_(), b = at::randn({D}).requires_grad_();
    with_grads({x, w}, [&] { return dew::nn::rms_norm(x, w, 1e-6); });
    x.mutable_grad().reset(), w.mutable_grad().reset();
    with_grads({x, w, b}, [&] { return dew::nn::affine_layer_norm(x, w, b, 1e-5); });
    x.mutable_grad().reset();
    with_grads({x}, [&] { return dew::nn::silu(x); });
    x.mutable_grad().reset();
    with_grads({x}, [&] { return dew::nn::gelu_tanh(x); });
    auto g = at::randn({6, D}).requires_grad_(), u = at::randn({6, D}).requires_grad_();
    with_grads({g, u}, [&] { return dew::nn::swiglu(g, u); });
    g.mutable_grad().reset(), u.mutable_grad().reset();
    with_grads({g, u}, [&] { return dew::nn::geglu(g, u); });
  }
  {
    auto x = at::randn({2, 4, 9, 48}), x_leaf = x.clone().requires_grad_();
    const auto angles = dew::nn::rotary_angles(at::arange(9).unsqueeze(0).expand({2, 9}), 48, 10000.0, at::kFloat);
    with_grads({x_leaf}, [&] { return dew::nn::apply_rotary(x_leaf, angles); });
  }
  for (bool causal : {true, false}) {
    auto q = at::randn({2, 4, 17, 40}).requires_grad_(), k = at::randn({2, 2, 17, 40}).requires_grad_(),
         v = at::randn({2, 2, 17, 40}).requires_grad_();
    with_grads({q, k, v}, [&] { return dew::nn::short_attention(q, k, v, causal, 0.15); });
  }
  {
    auto x = at::randn({3, 5, 24}).requires_grad_(), gate = at::randn({3, 24}).requires_grad_(),
         branch = at::randn({3, 5, 24}).requires_grad_(), shift = at::randn({3, 24}).requires_grad_(),
         scale = at::randn({3, 24}).requires_grad_();
    with_grads({x, gate, branch}, [&] { return dew::nn::diffusion::gated_residual(x, gate, branch); });
    x.mutable_grad().reset();
    with_grads({x, shift, scale}, [&] { return dew::nn::diffusion::modulated_layer_norm(x, shift, scale, 1e-6); });
  }
  {
    std::vector<at::Tensor> targets{at::randn({100}), at::randn({7, 3})}, sources{at::randn({100}), at::randn({7, 3})};
    for (double weight : {0.25, 0.75}) {
      dew::nn::lerp_each(targets, sources, weight);
      for (const auto& t : targets) results.push_back(t.clone());
    }
  }
  {
    dew::training::NamedTensors params{{"w", at::randn({8, 40}).requires_grad_()}, {"b", at::randn({40}).requires_grad_()}};
    auto optimizer = dew::training::make_optimizer(dew::training::OptimConfig{}, params);
    for (int step = 0; step < 3; ++step) {
      for (auto& [name, p] : params) p.mutable_grad() = at::randn(p.sizes());
      optimizer->step(1e-2, 0.5);
    }
    for (const auto& [name, p] : params) results.push_back(p.detach().clone());
  }
  return results;
}

TEST(KernelsCpuIsa, EveryCompiledCopyComputesWhatTheDetectedOneDoes) {
  const std::vector<at::Tensor> detected = run_ops();
  for (CpuIsa isa : runnable_levels()) {
    ForcedIsa forced(isa);
    const std::vector<at::Tensor> got = run_ops();
    ASSERT_EQ(got.size(), detected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      // The copies differ only where a wider one fuses a multiply-add (one rounding fewer, 2^-24 relative)
      // and in vector width inside a lane-wise sum, over at most 64-term row sums of O(1) values:
      // 64 * 2^-24 * |value| ~ 4e-6 relative; 1e-5 leaves room, and a wrong copy is off by O(1).
      EXPECT_TRUE(at::allclose(got[i], detected[i], 1e-5, 1e-5))
          << dew::nn::kernels::cpu_isa_name(isa) << " result " << i << ": largest difference "
          << (got[i] - detected[i]).abs().max().item<float>();
    }
  }
}

}  // namespace
