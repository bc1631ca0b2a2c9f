#include "dew/inference/slot_cache.h"

#include "dew/core/error.h"

namespace dew::inference {

SlotCache::SlotCache(const nn::CausalTransformerConfig& config, std::int64_t rows, std::int64_t capacity,
                     c10::ScalarType dtype, c10::Device device)
    : rows_(rows),
      cache_(nn::KVCache::allocate(config, rows, capacity, dtype, device)),
      front_views_(static_cast<std::size_t>(rows)),
      row_views_(static_cast<std::size_t>(rows)) {
  cache_.slots_by_position = true;
}

nn::KVCache& SlotCache::view(std::int64_t first, std::int64_t count, std::int64_t span) {
  std::optional<nn::KVCache>* slot = nullptr;
  if (first == 0) {
    slot = &front_views_.at(static_cast<std::size_t>(count - 1));
  } else if (count == 1) {
    slot = &row_views_.at(static_cast<std::size_t>(first));
  } else {
    dew::fail("SlotCache::view: rows [", first, ", ", first + count, ") are neither the front block nor one row");
  }
  if (!*slot) *slot = cache_.rows(first, count);
  (*slot)->span = span;
  return **slot;
}

void SlotCache::clear(std::int64_t row) { cache_.segments[row].zero_(); }

void SlotCache::move(std::int64_t from, std::int64_t to, std::int64_t length) {
  if (from == to) return;
  if (length > 0) {
    for (auto* per_layer : {&cache_.keys, &cache_.values}) {
      for (auto& t : *per_layer) t[to].narrow(1, 0, length).copy_(t[from].narrow(1, 0, length));
    }
  }
  cache_.positions[to].copy_(cache_.positions[from]);
  cache_.segments[to].copy_(cache_.segments[from]);
}

void SlotCache::swap(std::int64_t a, std::int64_t la, std::int64_t b, std::int64_t lb) {
  if (a == b) return;
  // Row a goes through a temporary (a join or leave, not a token: the allocation is not per token).
  for (auto* per_layer : {&cache_.keys, &cache_.values}) {
    for (auto& t : *per_layer) {
      auto saved = t[a].narrow(1, 0, la).clone();
      if (lb > 0) t[a].narrow(1, 0, lb).copy_(t[b].narrow(1, 0, lb));
      if (la > 0) t[b].narrow(1, 0, la).copy_(saved);
    }
  }
  for (auto* t : {&cache_.positions, &cache_.segments}) {
    auto saved = (*t)[a].clone();
    (*t)[a].copy_((*t)[b]);
    (*t)[b].copy_(saved);
  }
}

}  // namespace dew::inference
