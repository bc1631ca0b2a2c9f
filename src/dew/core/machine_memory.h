#pragma once
// How much memory this machine can give a new allocation: what a model is checked against before it is
// built (a model too large for memory should be refused with numbers, not die in the allocator or swap).
#include <cstdint>
#include <optional>
#include <string>

namespace dew {

struct AvailableMemory {
  std::uint64_t bytes = 0;
  std::string source;  // where the number came from, for messages: "MemAvailable in /proc/meminfo", ...
};

// Host memory: MemAvailable from /proc/meminfo, else the physical memory (sysconf); nullopt if neither
// can be read.
std::optional<AvailableMemory> available_host_memory();

// Free memory of CUDA device `index` (cudaMemGetInfo, found in the CUDA runtime LibTorch has loaded);
// nullopt when the runtime or the device cannot be asked.
std::optional<AvailableMemory> available_cuda_memory(int index);

}  // namespace dew
