#pragma once
// Preference pairs as DPO reads them: each record is one pair, a prompt with a chosen and a rejected
// completion, as two right-padded rows of ids. A batch of B pairs holds
//   chosen, rejected                    int64 [B, L]  prompt + completion ids, 0 in padding
//   chosen_segment_ids, rejected_...    int64 [B, L]  1 on real ids, 0 on padding
//   chosen_mask, rejected_mask          fp32 [B, L - 1]  1 where the target (id t + 1) is a completion id
// L is the longest row of the batch (at most max_ids), so short pairs do not pay for long ones.
//
// Overlong rule: a pair whose prompt + completion exceeds max_ids keeps its prompt whole and cuts the
// completion's tail to fit (TRL cuts completions the same way, max_completion_length); a pair whose prompt
// leaves no room for one completion id is dropped. Both are counted (counts()), so the run reports them.
// Records are shuffled per epoch for training and in order for validation, and resume exactly
// (RecordSchedule).
#include <cstdint>
#include <vector>

#include "dew/data/batch_source.h"
#include "dew/data/record_order.h"
#include "dew/data/tokenizers/tokenizer.h"

namespace dew::data {

struct PreferenceIds {
  std::vector<TokenId> prompt, chosen, rejected;
};

struct PreferenceCounts {
  std::int64_t pairs = 0, kept = 0, truncated = 0, dropped = 0;
};

class PreferenceRows : public BatchSource {
 public:
  // `what` names the data in errors ("pairs.jsonl (train split)"). Refused: max_ids < 2, no pair left.
  PreferenceRows(std::vector<PreferenceIds> pairs, std::int64_t max_ids, TokenLoaderOptions options, std::string what);

  Batch next_batch(std::int64_t rows) override;
  std::int64_t position() const override { return schedule_.position(); }
  void set_position(std::int64_t position) override { schedule_.set_position(position); }
  std::int64_t records() const override { return schedule_.records(); }

  const PreferenceCounts& counts() const { return counts_; }

 private:
  std::vector<PreferenceIds> pairs_;  // after the overlong rule
  PreferenceCounts counts_;
  RecordSchedule schedule_;
};

}  // namespace dew::data
