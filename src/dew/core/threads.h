#pragma once
// How many threads to use, and a minimal fork-join helper for embarrassingly parallel work.
#include <cstddef>
#include <functional>

namespace dew {

// Cores this process may use (sched affinity), at least 1. DEW_THREADS overrides it.
int available_threads();

// Runs body(i) for i in [0, count) on up to `threads` threads (0 = available_threads()). Exceptions from
// any task are rethrown in the caller after all tasks stop.
void parallel_for(std::size_t count, int threads, const std::function<void(std::size_t)>& body);

}  // namespace dew
