#include "dew/distributed/torch_threads.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>

#include "dew/core/threads.h"
#include "dew/distributed/process_place.h"

namespace dew::distributed {

void use_available_threads() {
  int threads = available_threads();
  // The processes of a multi-process job on one host share its cores: each takes its part (as torchrun
  // sets OMP_NUM_THREADS for its workers), else their OpenMP teams oversubscribe the cores. DEW_THREADS,
  // when set, is each process's count as it is.
  const char* fixed = std::getenv("DEW_THREADS");
  if (!(fixed && *fixed)) threads = std::max<int>(1, threads / static_cast<int>(distributed::process_place().local_world));
  at::set_num_threads(threads);
}

}  // namespace dew::distributed
