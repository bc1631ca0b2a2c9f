#include "dew/cli/torch_threads.h"

#include <ATen/Parallel.h>

#include "dew/core/threads.h"

namespace dew::cli {

void use_available_threads() { at::set_num_threads(available_threads()); }

}  // namespace dew::cli
