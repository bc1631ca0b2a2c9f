#pragma once
// The step engine's KV cache: one row (slot) per running request, each row filled to its own length, its
// slot j holding the token at position j (nn::KVCache's slots-by-position mode).
//
// The decode batch is always rows [0, d): a contiguous block of the cache, so one forward runs on views of
// it with no gather or scatter of cache rows per token. Keeping the decoding requests at the front costs a
// row copy when a request joins the decode batch or leaves it (move, swap), never one per token.
//
// Each row also remembers which tokens its filled slots hold (`tokens`), and keeps them after its request
// ends, until the row is reused: the keys and values of a causal decoder at position j depend only on the
// tokens up to j, so a new prompt that begins with the same tokens (a shared system prompt, the earlier turns
// of a conversation) can copy those slots instead of computing them again (`longest_prefix`, the engine's
// prefix cache).
#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "dew/nn/kv_cache.h"

namespace dew::inference {

class SlotCache {
 public:
  // Allocates rows x capacity slots per layer (zeros) in the model's compute dtype on its device.
  SlotCache(const nn::CausalTransformerConfig& config, std::int64_t rows, std::int64_t capacity, c10::ScalarType dtype,
            c10::Device device);

  std::int64_t rows() const { return rows_; }
  std::int64_t capacity() const { return cache_.capacity(); }

  // A cache of rows [first, first + count) that writes through to this one, set to attend over slots
  // [0, span). The front block's and single rows' views are made once and then reused.
  nn::KVCache& view(std::int64_t first, std::int64_t count, std::int64_t span);

  // The tokens whose keys and values fill the row's slots [0, size).
  const std::vector<std::int32_t>& tokens(std::int64_t row) const { return tokens_.at(static_cast<std::size_t>(row)); }
  // Notes that a forward wrote `count` tokens into the row's slots [from, from + count).
  void wrote(std::int64_t row, std::int64_t from, const std::int32_t* tokens, std::int64_t count);
  // Keeps the row's first `keep` slots and hides the rest (segments 0), so nothing stale is visible even to a
  // bidirectional model (a causal one never looks past its own position anyway). keep = 0 empties the row.
  void truncate(std::int64_t row, std::int64_t keep);
  // Copies the first `length` slots of row `from` into row `to` (positions and segments whole).
  void move(std::int64_t from, std::int64_t to, std::int64_t length);
  // Exchanges rows a and b: their filled slots and their tokens.
  void swap(std::int64_t a, std::int64_t b);

  // The row whose filled slots begin with the longest run of `prompt`'s first tokens, at most `limit` of them
  // (row -1 and length 0 when no row shares even the first token).
  struct Prefix {
    std::int64_t row = -1, length = 0;
  };
  Prefix longest_prefix(const std::vector<std::int32_t>& prompt, std::int64_t limit) const;

 private:
  std::int64_t rows_;
  nn::KVCache cache_;
  std::vector<std::vector<std::int32_t>> tokens_;         // per row
  std::vector<std::optional<nn::KVCache>> front_views_;  // rows [0, d), at index d - 1
  std::vector<std::optional<nn::KVCache>> row_views_;    // row r alone, at index r
  std::optional<nn::KVCache> other_view_;                // any other block, made for the call
};

}  // namespace dew::inference
