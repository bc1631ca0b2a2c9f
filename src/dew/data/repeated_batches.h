#pragma once
// Serves every block of batches of an inner source `times` times in a row: GRPO optimises each rollout
// batch over grpo.epochs passes (steps), so the prompts of one step come back for the next epochs - 1 steps.
// A block is the batches of one trainer step (trainer.grad_accum micro-batches): the whole block is
// replayed, not each micro-batch on its own, so step s + 1 sees micro-batches 0, 1, ... of step s again.
//
// Position encoding (one int64, what a checkpoint saves): position = P * times + r, where P is the inner
// source's position at the start of the current block and r (0 <= r < times) how many times that block has
// been served whole. At the start of a fresh block (r = 0) P is simply the inner position. Restoring it
// rewinds the inner source to P and serves the block times - r more times, exactly as an uninterrupted run.
// Asked in the middle of a block, position() names the start of the current pass over it (a restore
// serves that pass again from its first batch); the trainer asks only between steps, at block boundaries.
//
// After S steps of B rows (inner position S' * B after S' = ceil(S / times) blocks), the encoded position
// is at most S * B: with r = 0 it is (S / times) * B * times = S * B; otherwise floor(S / times) * B * times
// + r <= S * B because r = S mod times <= (S mod times) * B. So the trainer's bound on a checkpoint's
// data_position (step * batch_size) still holds.
#include <cstdint>
#include <memory>

#include "dew/data/batch_source.h"

namespace dew::data {

class RepeatedBatches : public BatchSource {
 public:
  // times >= 1 (1 = pass-through), block >= 1 batches.
  RepeatedBatches(std::unique_ptr<BatchSource> inner, std::int64_t times, std::int64_t block = 1);

  Batch next_batch(std::int64_t rows) override;
  std::int64_t position() const override;
  void set_position(std::int64_t position) override;
  std::int64_t records() const override { return inner_->records(); }

  std::int64_t times() const { return times_; }
  std::int64_t block() const { return block_; }

 private:
  std::unique_ptr<BatchSource> inner_;
  std::int64_t times_, block_;
  std::int64_t block_start_ = 0;  // inner position where the current block starts (valid when repeat_ > 0 or mid-block)
  std::int64_t repeat_ = 0;       // whole passes over the current block served so far
  std::int64_t served_ = 0;       // batches of the current pass served so far (0 = at a block boundary)
};

}  // namespace dew::data
