// Tensor tests run one intra-op thread each: ctest runs test processes side by side on small machines,
// and LibTorch's default (one OpenMP thread per core in every process) made tiny-model tests stall
// waiting on each other (seconds became minutes on a loaded 2-core machine). DEW_TEST_THREADS overrides.
#include <ATen/Parallel.h>

#include <cstdlib>

namespace {
const bool kSingleThreaded = [] {
  const char* env = std::getenv("DEW_TEST_THREADS");
  at::set_num_threads(env ? std::max(1, std::atoi(env)) : 1);
  return true;
}();
}  // namespace
