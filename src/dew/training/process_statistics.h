#pragma once
// Additive statistics summed over the processes of a data-parallel job: each rank computed them on its
// shard, every rank gets the totals (so every rank logs, checks and stops on the same numbers).
#include <string>

#include "dew/distributed/process_group.h"
#include "dew/objectives/statistics.h"

namespace dew::training {

// Every rank must report the same statistic names (one check collective first refuses a mismatch rather
// than summing unrelated numbers).
objectives::Statistics sum_over_processes(const objectives::Statistics& local, distributed::ProcessGroup& group,
                                          const std::string& what);

}  // namespace dew::training
