#include "dew/training/evaluate.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "dew/core/error.h"

namespace dew::training {

data::Batch to_device(const data::Batch& batch, c10::Device device) {
  data::Batch out;
  for (const auto& [name, t] : batch.tensors()) out.set(name, t.device() == device ? t : t.to(device, /*non_blocking=*/true));
  return out;
}

objectives::Statistics evaluate_objective(objectives::Objective& objective, data::BatchSource& source, std::int64_t rows,
                                          std::int64_t max_batches, c10::Device device) {
  if (rows <= 0) fail("evaluation batch size must be positive, got ", rows);
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
      const std::int64_t n = std::min(rows, records - taken);
      total.merge(objective.evaluate(to_device(source.next_batch(n), device)));
      taken += n;
      ++batches;
    }
  } catch (...) {
    module.train(was_training);
    throw;
  }
  module.train(was_training);
  return total;
}

}  // namespace dew::training
