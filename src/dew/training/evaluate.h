#pragma once
// One evaluation pass: additive statistics of an objective over a validation source, with whatever weights
// the module holds now (the trainer swaps the EMA copy in first). With max_batches = 0 the pass covers
// every record once (the last batch is short when rows does not divide the record count), so
// perplexity = exp(token-weighted mean ce) over the whole split.
#include <c10/core/Device.h>

#include <cstdint>

#include "dew/data/batch_source.h"
#include "dew/distributed/process_group.h"
#include "dew/objectives/objective.h"

namespace dew::training {

// Moves every tensor of a batch to `device` (no copy when already there).
data::Batch to_device(const data::Batch& batch, c10::Device device);

// Reads `source` from position 0 in batches of `rows`; the module is put in eval mode for the pass and
// back in its previous mode after. No gradients.
//
// With a process group, `source` is this rank's shard (its loader made with the group's rank and world):
// each batch of `rows` is split over the ranks, a rank's records past the end of the split (the last
// batch) are left out, and the statistics are summed over the processes, so every rank returns what one
// process reading the whole split would.
objectives::Statistics evaluate_objective(objectives::Objective& objective, data::BatchSource& source, std::int64_t rows,
                                          std::int64_t max_batches, c10::Device device,
                                          distributed::ProcessGroup* group = nullptr);

}  // namespace dew::training
