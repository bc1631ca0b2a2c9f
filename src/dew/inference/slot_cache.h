#pragma once
// The step engine's KV cache: one row (slot) per running request, each row filled to its own length, its
// slot j holding the token at position j (nn::KVCache's slots-by-position mode).
//
// The decode batch is always rows [0, d): a contiguous block of the cache, so one forward runs on views of
// it with no gather or scatter of cache rows per token. Keeping the decoding requests at the front costs a
// row copy when a request joins the decode batch or leaves it (move, swap), never one per token.
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
  // [0, span). Views are made once per (first, count) shape the engine uses and then reused.
  nn::KVCache& view(std::int64_t first, std::int64_t count, std::int64_t span);

  // Empties a row for a new request: its segments go to 0, so nothing stale is visible even to a
  // bidirectional model (a causal one never looks past its own position anyway).
  void clear(std::int64_t row);
  // Copies the first `length` slots of row `from` into row `to` (positions and segments whole).
  void move(std::int64_t from, std::int64_t to, std::int64_t length);
  // Exchanges rows a and b, the first la and lb slots of each.
  void swap(std::int64_t a, std::int64_t la, std::int64_t b, std::int64_t lb);

 private:
  std::int64_t rows_;
  nn::KVCache cache_;
  std::vector<std::optional<nn::KVCache>> front_views_;  // rows [0, d), at index d - 1
  std::vector<std::optional<nn::KVCache>> row_views_;    // row r alone, at index r
};

}  // namespace dew::inference
