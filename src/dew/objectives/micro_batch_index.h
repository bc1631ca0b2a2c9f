#pragma once
// Which micro-batch of its optimizer step a loss() call is. The trainer calls loss() once per micro-batch with
// the step's index; objectives whose randomness (or cached rollouts) is keyed by (step, micro-batch) count the
// calls within a step here: 0 on the first call of a new step, then 1, 2, ...
//
// In a data-parallel job each process counts its own calls; stream_key() numbers a micro-batch among all
// processes' micro-batches of the step (micro * world + rank), so the processes draw different noise, and a
// job of N processes with one row per micro-batch draws for each row what one process drawing N micro-batches
// of one row would (the loaders interleave rows the same way).
#include <cstdint>

#include "dew/distributed/process_place.h"

namespace dew::objectives {

class MicroBatchIndex {
 public:
  // The micro-batch index of this call of loss() at `step`.
  std::int64_t next(std::int64_t step) {
    micro_ = step == step_ ? micro_ + 1 : 0;
    step_ = step;
    return micro_;
  }
  // next(step) as a key of the random streams of the whole job.
  std::int64_t next_stream_key(std::int64_t step) {
    const auto& place = distributed::process_place();
    return next(step) * place.world + place.rank;
  }
  // The step of the last call (-1 before any, or after reset()).
  std::int64_t step() const { return step_; }
  // Forgets the last call (a resumed objective starts counting afresh).
  void reset() { step_ = -1, micro_ = -1; }

 private:
  std::int64_t step_ = -1, micro_ = -1;
};

}  // namespace dew::objectives
