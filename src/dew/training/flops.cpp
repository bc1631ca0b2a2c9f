#include "dew/training/flops.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>

namespace dew::training {

double measure_peak_flops(c10::Device device, c10::ScalarType dtype) {
  at::NoGradGuard no_grad;
  const std::int64_t n = device.is_cuda() ? 8192 : 1024;
  auto options = at::TensorOptions().device(device).dtype(dtype);
  // The values do not matter to the timing; what matters is not drawing from the shared CPU generator.
  at::Generator own = at::make_generator<at::CPUGeneratorImpl>(0x666c6f7073ULL);  // "flops"
  auto draw = [&] { return at::randn({n, n}, own, options.device(c10::kCPU)).to(device); };
  auto a = draw(), b = draw();
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
