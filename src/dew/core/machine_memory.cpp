#include "dew/core/machine_memory.h"

#include <dlfcn.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace dew {

namespace {
// A container's limit (cgroup v2) less what it uses, when there is one: /proc/meminfo shows the host's.
std::optional<std::uint64_t> cgroup_headroom() {
  std::ifstream max_file("/sys/fs/cgroup/memory.max"), current_file("/sys/fs/cgroup/memory.current");
  std::uint64_t max = 0, current = 0;
  if (!(max_file >> max) || !(current_file >> current)) return std::nullopt;  // absent, or "max" (no limit)
  return max > current ? max - current : 0;
}
}  // namespace

std::optional<AvailableMemory> available_host_memory() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    std::uint64_t kib = 0;
    if (!(fields >> kib)) break;
    if (auto headroom = cgroup_headroom(); headroom && *headroom < kib * 1024) {
      return AvailableMemory{*headroom, "the container's memory.max less memory.current (cgroup)"};
    }
    return AvailableMemory{kib * 1024, "MemAvailable in /proc/meminfo"};
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) {
    return AvailableMemory{static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page), "physical memory"};
  }
  return std::nullopt;
}

std::optional<AvailableMemory> available_cuda_memory(int index) {
  // Looked up at run time: dew builds against LibTorch without the CUDA headers, but the CUDA build of
  // LibTorch has the runtime loaded. These are the runtime API's C signatures (cudaError_t is an int).
  using GetDevice = int (*)(int*);
  using SetDevice = int (*)(int);
  using MemGetInfo = int (*)(std::size_t*, std::size_t*);
  auto get_device = reinterpret_cast<GetDevice>(dlsym(RTLD_DEFAULT, "cudaGetDevice"));
  auto set_device = reinterpret_cast<SetDevice>(dlsym(RTLD_DEFAULT, "cudaSetDevice"));
  auto mem_get_info = reinterpret_cast<MemGetInfo>(dlsym(RTLD_DEFAULT, "cudaMemGetInfo"));
  if (!get_device || !set_device || !mem_get_info) return std::nullopt;
  int previous = 0;
  if (get_device(&previous) != 0 || set_device(index) != 0) return std::nullopt;
  std::size_t free = 0, total = 0;
  const bool ok = mem_get_info(&free, &total) == 0;
  set_device(previous);
  if (!ok) return std::nullopt;
  return AvailableMemory{free, "free memory of cuda:" + std::to_string(index) + " (cudaMemGetInfo)"};
}

}  // namespace dew
