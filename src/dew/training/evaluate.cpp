#include "dew/training/evaluate.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "dew/core/error.h"
#include "dew/training/process_statistics.h"

namespace dew::training {

data::Batch to_device(const data::Batch& batch, c10::Device device) {
  data::Batch out;
  for (const auto& [name, t] : batch.tensors()) out.set(name, t.device() == device ? t : t.to(device, /*non_blocking=*/true));
  return out;
}

namespace {

// The first `rows` rows of every tensor of a batch.
data::Batch first_rows(const data::Batch& batch, std::int64_t rows) {
  data::Batch out;
  for (const auto& [name, t] : batch.tensors()) out.set(name, t.narrow(0, 0, rows));
  return out;
}

}  // namespace

objectives::Statistics evaluate_objective(objectives::Objective& objective, data::BatchSource& source, std::int64_t rows,
                                          std::int64_t max_batches, c10::Device device, distributed::ProcessGroup* group) {
  if (rows <= 0) fail("evaluation batch size must be positive, got ", rows);
  const std::int64_t world = group ? group->world() : 1, rank = group ? group->rank() : 0;
  at::NoGradGuard no_grad;
  auto& module = objective.module();
  const bool was_training = module.is_training();
  module.eval();
  objectives::Statistics total;
  source.set_position(0);
  const std::int64_t records = source.records();
  std::int64_t taken = 0, batches = 0;
  try {
    while (taken < records && (max_batches <= 0 || batches < max_batches)) {
      // n global records, ceil(n / world) rows per rank; rank r's j-th row is global record taken + r + j * world.
      const std::int64_t n = std::min(std::max<std::int64_t>(rows / world, 1) * world, records - taken);
      const std::int64_t per_rank = (n + world - 1) / world;
      const std::int64_t mine = std::max<std::int64_t>(0, std::min(per_rank, (n - rank + world - 1) / world));
      data::Batch batch = source.next_batch(per_rank);
      if (mine > 0) total.merge(objective.evaluate(to_device(mine < per_rank ? first_rows(batch, mine) : batch, device)));
      taken += n;
      ++batches;
    }
  } catch (...) {
    module.train(was_training);
    throw;
  }
  module.train(was_training);
  return group ? sum_over_processes(total, *group, "evaluation") : total;
}

}  // namespace dew::training
