#pragma once
// Prompts for GRPO as a BatchSource: a batch names which prompts to roll out, not their tokens,
//
//   prompt_index  int64 [rows]  index of the record in the prompt file (0-based, file order)
//
// and the objective, which holds the records and their encoded ids, looks each one up. The validation
// split is the head of the file: the first val_count records; training reads the rest. Records are
// shuffled per epoch for training and read in order for validation, sharded and resumed by one int64
// position, exactly as the token loaders (RecordSchedule).
#include <cstdint>
#include <string>

#include "dew/data/batch_source.h"
#include "dew/data/record_order.h"

namespace dew::data {

// How many of `records` prompts the validation split takes: round(val_fraction * records), where a
// negative val_fraction means the default, 0.1 for ten records or more and none below that. Refuses a
// fraction outside [0, 1) (negatives aside) and one that leaves no training prompt.
std::int64_t prompt_val_count(std::int64_t records, double val_fraction, const std::string& field = "data.val_fraction");

class PromptRows : public BatchSource {
 public:
  // `records` prompts in the file, of which the first `val_count` form the validation split.
  PromptRows(std::int64_t records, std::int64_t val_count, TokenLoaderOptions options = {});

  Batch next_batch(std::int64_t rows) override;
  std::int64_t position() const override { return schedule_.position(); }
  void set_position(std::int64_t position) override { schedule_.set_position(position); }
  std::int64_t records() const override { return schedule_.records(); }

 private:
  std::int64_t first_;  // file index of the split's first record
  RecordSchedule schedule_;
};

}  // namespace dew::data
