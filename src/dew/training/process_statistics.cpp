#include "dew/training/process_statistics.h"

#include <cstdint>
#include <functional>
#include <vector>

#include "dew/core/error.h"

namespace dew::training {

objectives::Statistics sum_over_processes(const objectives::Statistics& local, distributed::ProcessGroup& group,
                                          const std::string& what) {
  // The names' hash in two exactly representable halves, and their count: equal on every rank or refused.
  std::string names;
  for (const auto& [name, s] : local.values()) names += name + '\n';
  const std::uint64_t hash = std::hash<std::string>{}(names);
  const std::vector<double> check{static_cast<double>(local.values().size()), static_cast<double>(hash & 0xffffffffu),
                                  static_cast<double>(hash >> 32)};
  const auto summed = group.all_reduce_sum(check, what + " (statistic names)");
  const double world = static_cast<double>(group.world());
  for (std::size_t i = 0; i < check.size(); ++i) {
    if (summed[i] != check[i] * world) {
      fail(group.place().describe(), ": the processes report different statistics for ", what, " (this rank: ",
           names.empty() ? std::string("none") : names, "); every rank needs at least one batch of the data");
    }
  }
  std::vector<double> values;
  for (const auto& [name, s] : local.values()) {
    values.push_back(s.sum);
    values.push_back(s.count);
  }
  const auto totals = group.all_reduce_sum(values, what);
  objectives::Statistics out;
  std::size_t i = 0;
  for (const auto& [name, s] : local.values()) {
    out.add(name, totals[i], totals[i + 1]);
    i += 2;
  }
  return out;
}

}  // namespace dew::training
