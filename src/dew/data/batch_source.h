#pragma once
// What a trainer pulls batches from: token windows, packed documents, or a prefetcher in front of either.
#include <cstdint>
#include <optional>

#include "dew/data/batch.h"
#include "dew/data/token_files.h"

namespace dew::data {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The next `rows` rows of this process's share.
  virtual Batch next_batch(std::int64_t rows) = 0;
  // Records taken from the global order so far (all processes together); save it, restore it with
  // set_position, and the next batches are exactly those an uninterrupted run would have read.
  virtual std::int64_t position() const = 0;
  virtual void set_position(std::int64_t position) = 0;
  // Records in one epoch (all processes together).
  virtual std::int64_t records() const = 0;
};

// Which split a token loader reads and how it orders and shards it.
struct TokenLoaderOptions {
  Split split = Split::train;
  std::uint64_t seed = 0;
  std::optional<bool> shuffle;  // default: shuffled per epoch for train, file order for val
  std::int64_t rank = 0;        // this process
  std::int64_t world = 1;       // process count

  bool shuffled() const { return shuffle.value_or(split == Split::train); }
};

}  // namespace dew::data
