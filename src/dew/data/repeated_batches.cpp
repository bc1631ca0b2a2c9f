#include "dew/data/repeated_batches.h"

#include "dew/core/error.h"

namespace dew::data {

RepeatedBatches::RepeatedBatches(std::unique_ptr<BatchSource> inner, std::int64_t times, std::int64_t block)
    : inner_(std::move(inner)), times_(times), block_(block) {
  if (!inner_) fail("RepeatedBatches needs a source to repeat");
  if (times_ < 1) fail("a batch can be served times >= 1 (the number of passes over it), got ", times_);
  if (block_ < 1) fail("a repeated block holds at least 1 batch, got ", block_);
}

Batch RepeatedBatches::next_batch(std::int64_t rows) {
  if (served_ == 0) {
    if (repeat_ == 0) {
      block_start_ = inner_->position();
    } else {
      inner_->set_position(block_start_);  // the next pass over the same block
    }
  }
  Batch batch = inner_->next_batch(rows);
  if (++served_ == block_) {
    served_ = 0;
    if (++repeat_ == times_) repeat_ = 0;
  }
  return batch;
}

std::int64_t RepeatedBatches::position() const {
  const std::int64_t start = (served_ == 0 && repeat_ == 0) ? inner_->position() : block_start_;
  return start * times_ + repeat_;
}

void RepeatedBatches::set_position(std::int64_t position) {
  if (position < 0) fail("a data position is a count of records read and cannot be negative, got ", position);
  block_start_ = position / times_;
  repeat_ = position % times_;
  served_ = 0;
  inner_->set_position(block_start_);
}

}  // namespace dew::data
