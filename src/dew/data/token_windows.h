#pragma once
// Fixed-width windows over a token split: record i is the seq_len + 1 ids starting at i * stride (the model
// reads the first seq_len and predicts the last seq_len). Ids are read in place from the memory-mapped
// file; a batch is {"text": int64 [rows, seq_len + 1]}. Order, position and sharding: RecordSchedule.
#include <cstdint>
#include <filesystem>

#include "dew/data/batch_source.h"
#include "dew/data/record_order.h"
#include "dew/data/token_files.h"

namespace dew::data {

class TokenWindows : public BatchSource {
 public:
  TokenWindows(const std::filesystem::path& dir, std::int64_t seq_len, TokenLoaderOptions options = {});
  TokenWindows(const std::filesystem::path& dir, std::int64_t seq_len, std::int64_t stride,
               TokenLoaderOptions options = {});

  Batch next_batch(std::int64_t rows) override;
  std::int64_t position() const override { return schedule_.position(); }
  void set_position(std::int64_t position) override { schedule_.set_position(position); }
  std::int64_t records() const override { return schedule_.records(); }

  const TokenMeta& meta() const { return files_.meta(); }
  std::int64_t seq_len() const { return seq_len_; }
  std::int64_t stride() const { return stride_; }
  // floor((tokens - (seq_len + 1)) / stride) + 1, or 0 when the split is shorter than one window.
  static std::int64_t count_windows(std::int64_t tokens, std::int64_t seq_len, std::int64_t stride);

 private:
  TokenWindows(TokenFiles files, std::int64_t seq_len, std::int64_t stride, TokenLoaderOptions options);
  TokenFiles files_;
  TokenArray ids_;
  std::int64_t seq_len_, stride_;
  RecordSchedule schedule_;
};

}  // namespace dew::data
