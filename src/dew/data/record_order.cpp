#include "dew/data/record_order.h"

#include "dew/core/error.h"

namespace dew::data {

namespace {

// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and fully specified, unlike std::shuffle's algorithm
// and the std distributions, which differ between standard libraries.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound) without modulo bias (rejection of the short last interval).
  std::uint64_t below(std::uint64_t bound) {
    const std::uint64_t threshold = (0 - bound) % bound;
    while (true) {
      std::uint64_t r = next();
      if (r >= threshold) return r % bound;
    }
  }
};

}  // namespace

std::vector<std::int64_t> shuffled_indices(std::int64_t n, std::uint64_t seed, std::uint64_t epoch) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  SplitMix64 mixer{seed};
  SplitMix64 rng{mixer.next() ^ (epoch * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull)};
  for (std::int64_t i = n - 1; i > 0; --i) {
    auto j = static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(i) + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

RecordSchedule::RecordSchedule(std::int64_t records, std::uint64_t seed, bool shuffle, std::int64_t rank,
                               std::int64_t world, std::string what)
    : records_(records), seed_(seed), shuffle_(shuffle), rank_(rank), world_(world), what_(std::move(what)) {
  if (world_ < 1) dew::fail("process count ", world_, " must be at least 1");
  if (rank_ < 0 || rank_ >= world_) dew::fail("process rank ", rank_, " is outside [0, ", world_, ")");
  if (records_ < 1) dew::fail(what_, " holds fewer than one record");
}

void RecordSchedule::set_position(std::int64_t position) {
  if (position < 0) dew::fail("data position ", position, " for ", what_, " must not be negative");
  position_ = position;
}

std::int64_t RecordSchedule::record_at(std::int64_t position) {
  std::int64_t epoch = position / records_;
  std::int64_t index = position % records_;
  if (!shuffle_) return index;
  if (epoch != cached_epoch_) {
    permutation_ = shuffled_indices(records_, seed_, static_cast<std::uint64_t>(epoch));
    cached_epoch_ = epoch;
  }
  return permutation_[static_cast<std::size_t>(index)];
}

std::vector<std::int64_t> RecordSchedule::next(std::int64_t rows) {
  if (rows < 1) dew::fail("batch size ", rows, " must be at least 1");
  if (rows * world_ > records_) {
    dew::fail(what_, " holds ", records_, " records, fewer than one batch of ", rows, world_ > 1 ? " rows per process x " : " rows",
              world_ > 1 ? dew::str(world_, " processes") : std::string(),
              "; use more data, a shorter seq_len or a smaller batch");
  }
  std::vector<std::int64_t> out(static_cast<std::size_t>(rows));
  for (std::int64_t j = 0; j < rows; ++j) out[static_cast<std::size_t>(j)] = record_at(position_ + rank_ + j * world_);
  position_ += rows * world_;
  return out;
}

}  // namespace dew::data
