#pragma once
// Every loader a run builds reads this process's shard of the data: the rank and process count of the job
// (distributed/process_place.h; 0 and 1 for a single process), so data parallelism needs nothing from a kind.
#include <cstdint>

#include "dew/data/batch_source.h"
#include "dew/distributed/process_place.h"

namespace dew::runs {

inline data::TokenLoaderOptions loader_options(data::Split split, std::uint64_t seed) {
  const auto& place = distributed::process_place();
  return data::TokenLoaderOptions{.split = split, .seed = seed, .rank = place.rank, .world = place.world};
}

}  // namespace dew::runs
