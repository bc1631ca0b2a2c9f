// dew's fused float32 CPU kernels (RMSNorm, LayerNorm, rotary, SwiGLU, tanh-GELU, short-sequence attention) against the
// ATen compositions they replace, which are the ops PyTorch eager runs for the same layers: forward +
// backward of each at the demo decoder's, SmolLM2-135M's, the DiT/ViTs' and JEPA's shapes (and, for the cases
// named "forward only", the forward alone without autograd: a frozen network's path, as JEPA's target
// encoder runs it), interleaved (fused, composition, fused, ...) so that a burst on a shared machine hits
// both, medians over the repetitions. One JSON line per case, with the ratio.
//
//   fused_layers_bench [--threads 1] [--reps 30] [--only SUBSTRING]   (--only: the cases whose name has it)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_support.h"
#include "dew/nn/activations.h"
#include "dew/nn/layer_norm.h"
#include "dew/nn/rms_norm.h"
#include "dew/nn/rotary.h"
#include "dew/nn/short_attention.h"

namespace {

using Clock = std::chrono::steady_clock;

// Seconds for one forward + backward of f on fresh leaves (the leaves' making is outside the timing), or
// for the forward alone without autograd (`forward_only`: the path of a frozen network, e.g. JEPA's target).
double time_once(const std::function<at::Tensor(const std::vector<at::Tensor>&)>& f, const std::vector<at::Tensor>& inputs,
                 const at::Tensor& grad, bool forward_only) {
  std::vector<at::Tensor> leaves;
  for (const auto& t : inputs) leaves.push_back(forward_only ? t : t.detach().clone().requires_grad_(true));
  const auto start = Clock::now();
  if (forward_only) {
    at::NoGradGuard no_grad;
    (void)f(leaves);
  } else {
    f(leaves).backward(grad);
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Case {
  std::string name;
  std::vector<at::Tensor> inputs;
  std::function<at::Tensor(const std::vector<at::Tensor>&)> fused, composition;
  bool forward_only = false;
};

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 30;
  std::string only;
  if (!dew::bench::parse_threads_and_reps(argc, argv, threads, reps, &only)) return 2;
  at::set_num_threads(threads);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  auto randn = [&](at::IntArrayRef shape) { return at::randn(shape, gen); };

  std::vector<Case> cases;
  auto rms = [&](const std::string& name, std::int64_t rows, std::int64_t d) {
    cases.push_back({name, {randn({rows, d}), at::ones({d})},
                     [](const auto& in) { return dew::nn::rms_norm(in[0], in[1], 1e-6); },
                     [](const auto& in) { return dew::nn::rms_norm_reference(in[0], in[1], 1e-6); }});
  };
  rms("rms_norm demo [2048, 256]", 2048, 256);
  rms("rms_norm demo qk [8192, 64]", 8192, 64);
  rms("rms_norm smollm2 [4096, 576]", 4096, 576);
  auto layer_norm = [&](const std::string& name, std::int64_t rows, std::int64_t d) {
    cases.push_back({name, {randn({rows, d}), at::ones({d}), at::zeros({d})},
                     [](const auto& in) { return dew::nn::affine_layer_norm(in[0], in[1], in[2], 1e-6); },
                     [](const auto& in) { return at::layer_norm(in[0], {in[0].size(-1)}, in[1], in[2], 1e-6); }});
  };
  layer_norm("layer_norm vit [3136, 128]", 3136, 128);
  layer_norm("layer_norm jepa predictor [4352, 64]", 4352, 64);
  auto rotary = [&](const std::string& name, std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t D) {
    auto angles = dew::nn::rotary_angles(at::arange(S).unsqueeze(0).expand({B, S}), D, 10000.0, at::kFloat);
    cases.push_back({name, {randn({B, S, H, D})},
                     [angles](const auto& in) { return dew::nn::apply_rotary(in[0].transpose(1, 2), angles); },
                     [angles](const auto& in) { return dew::nn::apply_rotary_reference(in[0].transpose(1, 2), angles); }});
  };
  rotary("rotary demo q [16, 4, 128, 64]", 16, 128, 4, 64);
  rotary("rotary smollm2 q [4, 9, 1024, 64]", 4, 1024, 9, 64);
  auto gated = [&](const std::string& name, std::int64_t rows, std::int64_t h) {
    cases.push_back({name, {randn({rows, h}), randn({rows, h})},
                     [](const auto& in) { return dew::nn::swiglu(in[0], in[1]); },
                     [](const auto& in) { return dew::nn::silu(in[0]) * in[1]; }});
  };
  gated("swiglu demo [2048, 1024]", 2048, 1024);
  gated("swiglu smollm2 [4096, 1536]", 4096, 1536);
  // The ViTs' MLP activation, with its backward and alone (JEPA's target encoder runs it without autograd).
  for (bool forward_only : {false, true}) {
    cases.push_back({std::string("gelu_tanh vit fc1 [3136, 512]") + (forward_only ? " forward only" : ""), {randn({3136, 512})},
                     [](const auto& in) { return dew::nn::gelu_tanh(in[0]); },
                     [](const auto& in) { return at::gelu(in[0], "tanh"); }, forward_only});
  }
  // Attention on q, k, v viewed out of one packed projection [B, N, 3, H, hd], as the layers call it,
  // against ATen's scaled_dot_product_attention (its flash kernel on the CPU).
  auto attention = [&](const std::string& name, std::int64_t B, std::int64_t H, std::int64_t N, std::int64_t hd, bool causal) {
    auto split = [B, H, N, hd](const at::Tensor& packed) { return packed.view({B, N, 3, H, hd}).permute({2, 0, 3, 1, 4}).unbind(0); };
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    cases.push_back({name, {randn({B, N, 3 * H * hd})},
                     [split, causal, scale](const auto& in) {
                       auto qkv = split(in[0]);
                       return dew::nn::short_attention(qkv[0], qkv[1], qkv[2], causal, scale);
                     },
                     [split, causal](const auto& in) {
                       auto qkv = split(in[0]);
                       return at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], std::nullopt, 0.0, causal);
                     }});
  };
  attention("attention dit/vit [64, 4, 49, 32]", 64, 4, 49, 32, false);
  // The packed entry the patch layers use: the projection's output in, its gradient out in one piece.
  cases.push_back({"attention packed dit/vit [64, 4, 49, 32]", {randn({64, 49, 3 * 4 * 32})},
                   [](const auto& in) { return dew::nn::short_attention_packed(in[0], 4, false, 1.0 / std::sqrt(32.0)); },
                   [](const auto& in) {
                     auto qkv = in[0].view({64, 49, 3, 4, 32}).permute({2, 0, 3, 1, 4}).unbind(0);
                     return at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2]).transpose(1, 2).reshape({64, 49, 128});
                   }});
  cases.push_back({"attention packed dit/vit [64, 4, 49, 32] forward only", cases.back().inputs, cases.back().fused,
                   cases.back().composition, true});
  attention("attention jepa context [64, 4, 8, 32]", 64, 4, 8, 32, false);
  attention("attention jepa predictor [256, 4, 17, 16]", 256, 4, 17, 16, false);
  attention("attention demo causal [16, 4, 128, 64]", 16, 4, 128, 64, true);

  for (const auto& c : cases) {
    if (c.name.find(only) == std::string::npos) continue;
    const auto probe = c.fused(c.inputs);
    const auto grad = at::randn(probe.sizes(), gen);
    for (int w = 0; w < 3; ++w) time_once(c.fused, c.inputs, grad, c.forward_only), time_once(c.composition, c.inputs, grad, c.forward_only);
    std::vector<double> fused, composition;
    for (int r = 0; r < reps; ++r) {
      fused.push_back(time_once(c.fused, c.inputs, grad, c.forward_only));
      composition.push_back(time_once(c.composition, c.inputs, grad, c.forward_only));
    }
    const double f = dew::bench::median(fused), a = dew::bench::median(composition);
    nlohmann::json line{{"case", c.name}, {"threads", threads}, {"fused_ms", 1e3 * f}, {"aten_ms", 1e3 * a}, {"speedup", a / f}};
    std::printf("%s\n", line.dump().c_str());
  }
  return 0;
}
