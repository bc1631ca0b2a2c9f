#include "dew/data/preference_rows.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "dew/core/error.h"

namespace dew::data {

namespace {

std::vector<PreferenceIds> apply_overlong_rule(std::vector<PreferenceIds> pairs, std::int64_t max_ids, PreferenceCounts& counts) {
  std::vector<PreferenceIds> kept;
  counts.pairs = static_cast<std::int64_t>(pairs.size());
  for (auto& pair : pairs) {
    const auto prompt = static_cast<std::int64_t>(pair.prompt.size());
    if (prompt == 0 || prompt + 1 > max_ids || pair.chosen.empty() || pair.rejected.empty()) {
      ++counts.dropped;
      continue;
    }
    const auto room = static_cast<std::size_t>(max_ids - prompt);
    const bool cut = pair.chosen.size() > room || pair.rejected.size() > room;
    if (pair.chosen.size() > room) pair.chosen.resize(room);
    if (pair.rejected.size() > room) pair.rejected.resize(room);
    ++(cut ? counts.truncated : counts.kept);
    kept.push_back(std::move(pair));
  }
  return kept;
}

// Rows of prompt + completion for one side of the batch, padded to `length`.
void fill_side(const std::vector<const PreferenceIds*>& pairs, bool chosen, std::int64_t length, Batch& batch,
               const std::string& name) {
  const auto rows = static_cast<std::int64_t>(pairs.size());
  auto ids = at::zeros({rows, length}, at::kLong), segments = at::zeros({rows, length}, at::kLong);
  auto mask = at::zeros({rows, length - 1}, at::kFloat);
  auto* ip = ids.data_ptr<std::int64_t>();
  auto* sp = segments.data_ptr<std::int64_t>();
  auto* mp = mask.data_ptr<float>();
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto& pair = *pairs[static_cast<std::size_t>(r)];
    const auto& completion = chosen ? pair.chosen : pair.rejected;
    std::int64_t t = 0;
    for (TokenId id : pair.prompt) ip[r * length + t] = id, sp[r * length + t] = 1, ++t;
    for (TokenId id : completion) {
      ip[r * length + t] = id, sp[r * length + t] = 1;
      mp[r * (length - 1) + t - 1] = 1.0f;  // the target at t is predicted from position t - 1
      ++t;
    }
  }
  batch.set(name, ids);
  batch.set(name + "_segment_ids", segments);
  batch.set(name + "_mask", mask);
}

}  // namespace

PreferenceRows::PreferenceRows(std::vector<PreferenceIds> pairs, std::int64_t max_ids, TokenLoaderOptions options,
                               std::string what)
    : pairs_(), schedule_(1, 0, false, 0, 1, "") {
  if (max_ids < 2) fail(what, ": rows of at most ", max_ids, " ids cannot hold a prompt and a completion; raise data.seq_len");
  pairs_ = apply_overlong_rule(std::move(pairs), max_ids, counts_);
  if (pairs_.empty()) {
    fail(what, ": no pair is left: all ", counts_.pairs, " have a prompt of data.seq_len = ", max_ids,
         " ids or more (or an empty completion); raise data.seq_len");
  }
  schedule_ = RecordSchedule(static_cast<std::int64_t>(pairs_.size()), options.seed, options.shuffled(), options.rank,
                             options.world, what);
}

Batch PreferenceRows::next_batch(std::int64_t rows) {
  std::vector<const PreferenceIds*> taken;
  std::int64_t length = 2;
  for (std::int64_t record : schedule_.next(rows)) {
    const auto& pair = pairs_[static_cast<std::size_t>(record)];
    taken.push_back(&pair);
    const auto prompt = static_cast<std::int64_t>(pair.prompt.size());
    length = std::max({length, prompt + static_cast<std::int64_t>(pair.chosen.size()),
                       prompt + static_cast<std::int64_t>(pair.rejected.size())});
  }
  Batch batch;
  fill_side(taken, /*chosen=*/true, length, batch, "chosen");
  fill_side(taken, /*chosen=*/false, length, batch, "rejected");
  return batch;
}

}  // namespace dew::data
