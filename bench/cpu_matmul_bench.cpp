// Float32 CPU matrix products: oneDNN (nn/cpu_matmul.h) against ATen's MKL path, which is what PyTorch eager
// runs, at the shapes a training step multiplies: forward x W^T, the input gradient dY W and the weight
// gradient dY^T x of SmolLM2-135M's projections and LM head and of bench/train_lm_bench.cpp's decoder, plus small products
// that place nn/cpu_matmul.cpp's size threshold; and for the weight gradients dew's own kernel
// (nn/weight_gradient.h) against MKL. The two are interleaved (aten, other, aten, ...) so that a burst on a
// shared machine hits both; medians over the repetitions. One JSON line per case, with GFLOP/s of each and the
// ratio other/aten (above 1: the other faster), "other" being onednn or dew.
//
//   cpu_matmul_bench [--threads N] [--reps 20] [--only SUBSTRING]   (--only: the cases whose name has it)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_support.h"
#include "dew/nn/cpu_matmul.h"
#include "dew/nn/weight_gradient.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds(const std::function<at::Tensor()>& f) {
  const auto start = Clock::now();
  auto out = f();
  (void)out;
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Case {
  std::string name;
  double multiply_adds;
  std::function<at::Tensor()> aten, other;
  std::string other_name = "onednn";
};

}  // namespace

int main(int argc, char** argv) {
  int threads = at::get_num_threads(), reps = 20;
  std::string only;
  if (!dew::bench::parse_threads_and_reps(argc, argv, threads, reps, &only)) return 2;
  at::set_num_threads(threads);
  if (!dew::nn::onednn_mm_transposed(at::ones({2, 2}), at::ones({2, 2})).defined()) {
    std::fprintf(stderr, "this libtorch has no oneDNN linear (or DEW_CPU_MATMUL=aten is set): nothing to compare\n");
    return 1;
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(0);
  auto randn = [&](at::IntArrayRef shape) { return at::randn(shape, gen); };

  std::vector<Case> cases;
  // n tokens, k inputs, m outputs: the three products of one Linear's forward and backward.
  auto layer = [&](const std::string& name, std::int64_t n, std::int64_t k, std::int64_t m) {
    auto x = randn({n, k}), w = randn({m, k}), dy = randn({n, m});
    const double macs = static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(m);
    cases.push_back({name + " forward x W^T", macs, [=] { return at::linear(x, w); },
                     [=] { return dew::nn::onednn_mm_transposed(x, w); }});
    cases.push_back({name + " input grad dY W", macs, [=] { return at::mm(dy, w); },
                     [=] { return dew::nn::onednn_mm_transposed(dy, w.t()); }});
    cases.push_back({name + " weight grad dY^T x", macs, [=] { return at::mm(dy.t(), x); },
                     [=] { return dew::nn::onednn_mm_transposed(dy.t().contiguous(), x.t()); }});
    // The other way round: (x^T dY)^T, copying x transposed (the narrower operand when k < m) and the
    // small [k, m] result back.
    cases.push_back({name + " weight grad (x^T dY)^T", macs, [=] { return at::mm(dy.t(), x); },
                     [=] { return dew::nn::onednn_mm_transposed(x.t().contiguous(), dy.t()).t().contiguous(); }});
    if (dew::nn::weight_gradient_applies(dy, x)) {
      cases.push_back({name + " weight grad dew kernel", macs, [=] { return at::mm(dy.t(), x); },
                       [=] { return dew::nn::weight_gradient(dy, x); }, "dew"});
    }
  };
  layer("smollm2 q/o [2048, 576->576]", 2048, 576, 576);
  layer("smollm2 k/v [2048, 576->192]", 2048, 576, 192);
  layer("smollm2 gate/up [2048, 576->1536]", 2048, 576, 1536);
  layer("smollm2 down [2048, 1536->576]", 2048, 1536, 576);
  layer("smollm2 head chunk [256, 576->49152]", 256, 576, 49152);
  layer("smollm2 lora A [2048, 576->16]", 2048, 576, 16);
  layer("smollm2 lora A [2048, 1536->16]", 2048, 1536, 16);
  layer("train_lm bench q/k/v/o [2048, 256->256]", 2048, 256, 256);
  layer("train_lm bench up [2048, 256->1024]", 2048, 256, 1024);
  layer("train_lm bench down [2048, 1024->256]", 2048, 1024, 256);
  layer("train_lm bench head [2048, 256->4096]", 2048, 256, 4096);
  layer("dit qkv [3136, 128->384]", 3136, 128, 384);
  layer("dit proj [3136, 128->128]", 3136, 128, 128);
  layer("dit fc1 [3136, 128->512]", 3136, 128, 512);
  layer("dit fc2 [3136, 512->128]", 3136, 512, 128);
  auto forward_only = [&](std::int64_t n, std::int64_t k, std::int64_t m) {
    auto x = randn({n, k}), w = randn({m, k});
    cases.push_back({"small [" + std::to_string(n) + ", " + std::to_string(k) + "->" + std::to_string(m) + "] forward",
                     static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(m), [=] { return at::linear(x, w); },
                     [=] { return dew::nn::onednn_mm_transposed(x, w); }});
  };
  for (auto [n, k, m] : std::vector<std::array<std::int64_t, 3>>{
           {1, 576, 1536}, {8, 576, 576}, {1, 192, 512}, {4, 1536, 576}, {16, 576, 1536}, {64, 576, 576}, {16, 256, 256}, {64, 256, 256}, {128, 256, 256}, {256, 256, 256}, {128, 192, 512}, {512, 192, 192}, {2048, 192, 192}, {2048, 64, 256}})
    forward_only(n, k, m);

  for (const auto& c : cases) {
    if (c.name.find(only) == std::string::npos) continue;
    for (int i = 0; i < 2; ++i) (void)seconds(c.aten), (void)seconds(c.other);  // warm-up: primitive cache, pages
    std::vector<double> aten, other;
    for (int i = 0; i < reps; ++i) {
      aten.push_back(seconds(c.aten));
      other.push_back(seconds(c.other));
    }
    const double a = dew::bench::median(aten), o = dew::bench::median(other);
    nlohmann::json line = {{"case", c.name},
                           {"threads", threads},
                           {"aten_gflops", 2 * c.multiply_adds / a / 1e9},
                           {c.other_name + "_gflops", 2 * c.multiply_adds / o / 1e9},
                           {"aten_us", a * 1e6},
                           {c.other_name + "_us", o * 1e6},
                           {c.other_name + "_over_aten", a / o}};
    std::printf("%s\n", line.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}
