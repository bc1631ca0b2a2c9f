#pragma once
// Which records a loader reads, in which order, on which rank: the part TokenWindows and PackedTokens share.
//
// The global order is epoch after epoch of a permutation of [0, records): shuffled by (seed, epoch) with an
// RNG dew owns (identical on every platform and library), or in file order for validation. The position is
// a count of records taken from the global order by all ranks together, one int64 that is saved with a
// checkpoint and restored, so a resumed run reads exactly the batches an uninterrupted one would. With
// `world` ranks, a batch of B rows takes global positions [position, position + B * world) and rank r gets
// the ones congruent to r modulo world: ranks see disjoint records whose union is the global batch.
#include <cstdint>
#include <string>
#include <vector>

namespace dew::data {

// A permutation of [0, n) drawn from (seed, epoch) by Fisher-Yates over a SplitMix64 stream.
std::vector<std::int64_t> shuffled_indices(std::int64_t n, std::uint64_t seed, std::uint64_t epoch);

class RecordSchedule {
 public:
  // `what` names the data in errors, e.g. "'data/train.bin' (seq_len 256)".
  RecordSchedule(std::int64_t records, std::uint64_t seed, bool shuffle, std::int64_t rank, std::int64_t world,
                 std::string what);

  // This rank's records for the next batch of `rows`; advances the position by rows * world. Refuses a
  // global batch larger than one epoch.
  std::vector<std::int64_t> next(std::int64_t rows);

  std::int64_t records() const { return records_; }
  std::int64_t position() const { return position_; }
  void set_position(std::int64_t position);
  // The record at a global position.
  std::int64_t record_at(std::int64_t position);

 private:
  std::int64_t records_;
  std::uint64_t seed_;
  bool shuffle_;
  std::int64_t rank_, world_;
  std::string what_;
  std::int64_t position_ = 0;
  std::int64_t cached_epoch_ = -1;
  std::vector<std::int64_t> permutation_;
};

}  // namespace dew::data
