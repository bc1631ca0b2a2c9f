#include "dew/data/tokenizers/bpe_merger.h"

#include <queue>

namespace dew::data {

BpeMerger::BpeMerger(const std::array<TokenId, 256>& byte_ids, const std::vector<std::array<TokenId, 3>>& merges)
    : byte_ids_(byte_ids) {
  std::size_t capacity = 16;
  while (capacity < merges.size() * 2) capacity *= 2;
  slots_.assign(capacity, Slot{kEmpty, 0, 0});
  shift_ = 64 - __builtin_ctzll(capacity);
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    auto [left, right, merged] = merges[rank];
    std::uint64_t key = (std::uint64_t(std::uint32_t(left)) << 32) | std::uint32_t(right);
    std::size_t i = (key * 0x9E3779B97F4A7C15ull) >> shift_;
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & (capacity - 1);
    slots_[i] = Slot{key, static_cast<std::int32_t>(rank), merged};
  }
}

void BpeMerger::merge(std::string_view piece, std::vector<TokenId>& out) const {
  if (piece.size() <= 64) merge_short(piece, out);
  else merge_long(piece, out);
}

// Quadratic in the piece length, but with no allocation and a tiny constant: prose pieces are short.
void BpeMerger::merge_short(std::string_view piece, std::vector<TokenId>& out) const {
  TokenId ids[64];
  std::size_t n = piece.size();
  for (std::size_t i = 0; i < n; ++i) ids[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
  while (n > 1) {
    std::int32_t best_rank = INT32_MAX;
    std::size_t best = 0;
    TokenId merged = 0;
    for (std::size_t i = 0; i + 1 < n; ++i) {
      const Slot* slot = lookup(ids[i], ids[i + 1]);
      if (slot && slot->rank < best_rank) {
        best_rank = slot->rank;
        best = i;
        merged = slot->merged;
      }
    }
    if (best_rank == INT32_MAX) break;
    ids[best] = merged;
    for (std::size_t i = best + 1; i + 1 < n; ++i) ids[i] = ids[i + 1];
    --n;
  }
  out.insert(out.end(), ids, ids + n);
}

// n log n for long pieces (a run of thousands of letters or spaces): a heap of candidate merges over a
// linked list of symbols, skipping candidates made stale by earlier merges (Hugging Face's algorithm).
void BpeMerger::merge_long(std::string_view piece, std::vector<TokenId>& out) const {
  struct Symbol {
    TokenId id;
    std::int64_t prev, next;  // -1 at the ends
    bool alive;
  };
  struct Candidate {
    std::int32_t rank;
    std::int64_t pos;
    TokenId left, right;  // the pair this candidate was made for: stale if the symbols changed
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : pos > other.pos;
    }
  };
  const auto n = static_cast<std::int64_t>(piece.size());
  std::vector<Symbol> symbols(piece.size());
  for (std::int64_t i = 0; i < n; ++i)
    symbols[i] = Symbol{byte_ids_[static_cast<unsigned char>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](std::int64_t pos) {
    if (pos < 0) return;
    std::int64_t next = symbols[pos].next;
    if (next < 0) return;
    if (const Slot* slot = lookup(symbols[pos].id, symbols[next].id))
      queue.push(Candidate{slot->rank, pos, symbols[pos].id, symbols[next].id});
  };
  for (std::int64_t i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0 || left.id != top.left) continue;
    Symbol& right = symbols[left.next];
    if (right.id != top.right) continue;
    left.id = lookup(top.left, top.right)->merged;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    consider(left.prev);
    consider(top.pos);
  }
  for (std::int64_t i = 0; i >= 0 && i < n; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace dew::data
