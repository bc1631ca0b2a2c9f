#pragma once
// Seconds since this process started, as the kernel counts it (/proc/self/stat's start time against
// /proc/uptime): it includes the dynamic loader and LibTorch's static initialisation, which a clock started
// in main() would miss. Resolution: the kernel's clock tick (10 ms). nullopt where /proc cannot be read.
#include <optional>

namespace dew {

std::optional<double> seconds_since_process_start();

}  // namespace dew
