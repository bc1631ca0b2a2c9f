#include "dew/data/token_windows.h"

#include <ATen/ATen.h>

#include "dew/core/error.h"

namespace dew::data {

namespace {

std::int64_t checked_windows(const TokenArray& ids, std::int64_t seq_len, std::int64_t stride) {
  if (seq_len < 1) dew::fail("seq_len ", seq_len, " must be at least 1");
  if (stride < 1) dew::fail("stride ", stride, " must be at least 1");
  std::int64_t n = TokenWindows::count_windows(ids.size(), seq_len, stride);
  if (n < 1) {
    dew::fail("'", ids.file().string(), "' holds ", ids.size(), " tokens, fewer than one window of seq_len + 1 = ",
              seq_len + 1, "; use more text, a larger val_fraction for the validation split, or a shorter seq_len");
  }
  return n;
}

}  // namespace

std::int64_t TokenWindows::count_windows(std::int64_t tokens, std::int64_t seq_len, std::int64_t stride) {
  if (tokens < seq_len + 1) return 0;
  return (tokens - (seq_len + 1)) / stride + 1;
}

TokenWindows::TokenWindows(const std::filesystem::path& dir, std::int64_t seq_len, TokenLoaderOptions options)
    : TokenWindows(TokenFiles(dir), seq_len, seq_len, options) {}

TokenWindows::TokenWindows(const std::filesystem::path& dir, std::int64_t seq_len, std::int64_t stride,
                           TokenLoaderOptions options)
    : TokenWindows(TokenFiles(dir), seq_len, stride, options) {}

TokenWindows::TokenWindows(TokenFiles files, std::int64_t seq_len, std::int64_t stride, TokenLoaderOptions options)
    : files_(std::move(files)),
      ids_(files_.split(options.split)),
      seq_len_(seq_len),
      stride_(stride),
      schedule_(checked_windows(ids_, seq_len, stride), options.seed, options.shuffled(), options.rank, options.world,
                dew::str("'", ids_.file().string(), "' (windows of seq_len ", seq_len, ", stride ", stride, ")")) {}

Batch TokenWindows::next_batch(std::int64_t rows) {
  std::vector<std::int64_t> records = schedule_.next(rows);
  const std::int64_t width = seq_len_ + 1;
  at::Tensor text = at::empty({rows, width}, at::kLong);
  std::int64_t* out = text.data_ptr<std::int64_t>();
  for (std::int64_t r = 0; r < rows; ++r) {
    ids_.copy_checked(records[static_cast<std::size_t>(r)] * stride_, width, out + r * width, meta().vocab_size);
  }
  Batch batch;
  batch.set("text", text);
  return batch;
}

}  // namespace dew::data
