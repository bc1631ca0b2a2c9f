// `dew version`: what this binary is and what it can use on this machine.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <cstdio>
#include <string>

#include "dew/cli/commands.h"
#include "dew/core/threads.h"

#ifdef DEW_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#endif

namespace dew::cli {

#ifdef DEW_WITH_CUDA
namespace {

#ifdef USE_C10D_NCCL
constexpr const char* kNccl = " and NCCL (multi-process GPU training)";
#else
constexpr const char* kNccl = "";
#endif

// CUDA's version numbers (13000 = 13.0) as people write them.
std::string cuda_version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

}  // namespace
#endif

void add_version_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("version", "Print dew's version, LibTorch's, CPU threads and CUDA devices");
  cmd->callback([] {
    std::printf("dew %s\n", DEW_VERSION);
    std::printf("LibTorch %s\n", TORCH_VERSION);
    std::printf("CPU threads: %d (intra-op %d)\n", available_threads(), at::get_num_threads());
#ifdef DEW_WITH_CUDA
    // What this binary was compiled against, then what this machine has: the build runs without a GPU.
    int driver = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;  // 0 too where no driver is installed
    std::printf("CUDA: built with CUDA %s%s; driver: %s\n", cuda_version(CUDART_VERSION).c_str(), kNccl,
                driver ? cuda_version(driver).c_str() : "none");
    int devices = static_cast<int>(c10::cuda::device_count());
    if (devices == 0) std::printf("CUDA devices: none visible\n");
    for (int d = 0; d < devices; ++d) {
      cudaDeviceProp prop{};
      cudaGetDeviceProperties(&prop, d);
      std::printf("CUDA device %d: %s, %.1f GiB, compute capability %d.%d\n", d, prop.name,
                  prop.totalGlobalMem / 1073741824.0, prop.major, prop.minor);
    }
#else
    std::printf("CUDA: not in this build (CPU-only LibTorch)\n");
#endif
  });
}

}  // namespace dew::cli
