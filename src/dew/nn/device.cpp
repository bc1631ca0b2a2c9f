#include "dew/nn/device.h"

#include <torch/cuda.h>

#include <optional>

#include "dew/core/error.h"
#include "dew/distributed/process_place.h"

namespace dew::nn {

namespace {

// Without an index, the GPU of this process's local rank: the processes `dew launch` starts on a host take
// one GPU each (LOCAL_RANK), as torchrun's do.
int default_cuda_index() {
  const auto count = static_cast<std::int64_t>(torch::cuda::device_count());
  return count > 0 ? static_cast<int>(distributed::process_place().local_rank % count) : 0;
}

}  // namespace

c10::Device resolve_device(const std::string& device, const std::string& field) {
  if (device == "auto") return torch::cuda::is_available() ? c10::Device(c10::kCUDA, default_cuda_index()) : c10::Device(c10::kCPU);
  std::optional<c10::Device> parsed;
  try {
    parsed.emplace(device);
  } catch (const std::exception&) {
    fail(field, " is '", device, "'; use auto, cpu, cuda or cuda:N");
  }
  if (!parsed->is_cpu() && !parsed->is_cuda()) fail(field, " is '", device, "'; use auto, cpu, cuda or cuda:N");
  if (parsed->is_cuda()) {
    if (!torch::cuda::is_available()) fail(field, " is '", device, "' but LibTorch sees no CUDA device; use cpu or auto");
    const auto index = parsed->has_index() ? parsed->index() : default_cuda_index();
    if (index >= static_cast<int>(torch::cuda::device_count())) {
      fail(field, " is '", device, "' but there are only ", torch::cuda::device_count(), " CUDA devices");
    }
    return c10::Device(c10::kCUDA, index);
  }
  return *parsed;
}

}  // namespace dew::nn
