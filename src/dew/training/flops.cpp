#include "dew/training/flops.h"

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>

namespace dew::training {

double decoder_flops_per_token(const nn::CausalTransformerConfig& c, std::int64_t seq_len) {
  const double E = static_cast<double>(c.emb_features), L = static_cast<double>(c.num_layers);
  const double H = static_cast<double>(c.num_heads), KV = static_cast<double>(c.resolved_kv_heads());
  const double D = static_cast<double>(c.resolved_head_dim()), F = static_cast<double>(c.resolved_mlp_features());
  const double attention = E * H * D * 2 + E * KV * D * 2;  // q, o and k, v projections
  const double mlp = (c.mlp == "gelu" ? 2.0 : 3.0) * E * F;
  const double output = E * static_cast<double>(c.vocab_size);
  const double matrices = L * (attention + mlp) + output;
  return 6.0 * matrices + 12.0 * L * H * D * static_cast<double>(seq_len);
}

double measure_peak_flops(c10::Device device, c10::ScalarType dtype) {
  at::NoGradGuard no_grad;
  const std::int64_t n = device.is_cuda() ? 8192 : 1024;
  auto options = at::TensorOptions().device(device).dtype(dtype);
  auto a = at::randn({n, n}, options), b = at::randn({n, n}, options);
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
  };
  auto c = at::mm(a, b);  // warm-up: kernel selection, thread pool start
  sync();
  double best = 0;
  const int reps = device.is_cuda() ? 20 : 5;
  for (int r = 0; r < 3; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) c = at::mm(a, b);
    sync();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * n * n * n * reps / seconds);
  }
  return best;
}

}  // namespace dew::training
