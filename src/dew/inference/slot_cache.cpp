#include "dew/inference/slot_cache.h"

#include <algorithm>

#include "dew/core/error.h"

namespace dew::inference {

SlotCache::SlotCache(const nn::CausalTransformerConfig& config, std::int64_t rows, std::int64_t capacity,
                     c10::ScalarType dtype, c10::Device device)
    : rows_(rows),
      cache_(nn::KVCache::allocate(config, rows, capacity, dtype, device)),
      tokens_(static_cast<std::size_t>(rows)),
      front_views_(static_cast<std::size_t>(rows)),
      row_views_(static_cast<std::size_t>(rows)) {
}

nn::KVCache& SlotCache::view(std::int64_t first, std::int64_t count, std::int64_t span) {
  if (first < 0 || count < 1 || first + count > rows_) {
    dew::fail("SlotCache::view: rows [", first, ", ", first + count, ") are outside the cache's ", rows_, " rows");
  }
  std::optional<nn::KVCache>* slot = &other_view_;
  if (first == 0) {
    slot = &front_views_[static_cast<std::size_t>(count - 1)];
  } else if (count == 1) {
    slot = &row_views_[static_cast<std::size_t>(first)];
  } else {
    other_view_.reset();
  }
  if (!*slot) *slot = cache_.rows(first, count);
  (*slot)->span = span;
  return **slot;
}

void SlotCache::wrote(std::int64_t row, std::int64_t from, const std::int32_t* tokens, std::int64_t count) {
  auto& held = tokens_.at(static_cast<std::size_t>(row));
  held.resize(static_cast<std::size_t>(from));
  held.insert(held.end(), tokens, tokens + count);
}

void SlotCache::truncate(std::int64_t row, std::int64_t keep) {
  auto& held = tokens_.at(static_cast<std::size_t>(row));
  held.resize(std::min(held.size(), static_cast<std::size_t>(keep)));
  cache_.segments[row].narrow(0, keep, capacity() - keep).zero_();
}

void SlotCache::move(std::int64_t from, std::int64_t to, std::int64_t length) {
  if (from == to) return;
  if (length > 0) {
    for (auto* per_layer : {&cache_.keys, &cache_.values}) {
      for (auto& t : *per_layer) t[to].narrow(1, 0, length).copy_(t[from].narrow(1, 0, length));
    }
  }
  cache_.positions[to].copy_(cache_.positions[from]);
  cache_.segments[to].copy_(cache_.segments[from]);
  const auto& held = tokens_[static_cast<std::size_t>(from)];
  tokens_[static_cast<std::size_t>(to)].assign(held.begin(), held.begin() + std::min<std::int64_t>(length, static_cast<std::int64_t>(held.size())));
}

void SlotCache::swap(std::int64_t a, std::int64_t b) {
  if (a == b) return;
  const auto la = static_cast<std::int64_t>(tokens_[static_cast<std::size_t>(a)].size());
  const auto lb = static_cast<std::int64_t>(tokens_[static_cast<std::size_t>(b)].size());
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
  std::swap(tokens_[static_cast<std::size_t>(a)], tokens_[static_cast<std::size_t>(b)]);
}

SlotCache::Prefix SlotCache::longest_prefix(const std::vector<std::int32_t>& prompt, std::int64_t limit) const {
  Prefix best;
  const auto most = std::min<std::int64_t>(limit, static_cast<std::int64_t>(prompt.size()));
  for (std::int64_t row = 0; row < rows_; ++row) {
    const auto& held = tokens_[static_cast<std::size_t>(row)];
    const auto n = std::min<std::int64_t>(most, static_cast<std::int64_t>(held.size()));
    const auto end = std::mismatch(held.begin(), held.begin() + n, prompt.begin()).first;
    const auto length = static_cast<std::int64_t>(end - held.begin());
    if (length > best.length) best = {row, length};
  }
  return best;
}

}  // namespace dew::inference
