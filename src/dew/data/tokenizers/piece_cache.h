#pragma once
// Remembers the tokens of pieces already merged. Prose repeats its words: on a novel nearly every piece
// is a hit after the first pages, and a hit costs one hash and one compare instead of a merge loop.
//
// One cache per thread and tokenizer (see BpeTokenizer::encode), so no locks; keys and values live in two
// flat arenas so an insert does not allocate per piece. It empties itself when it reaches its budget.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dew::data {

class PieceCache {
 public:
  using TokenId = std::int32_t;
  static constexpr std::size_t kMaxPieceBytes = 256;  // longer pieces are rare and not worth keeping

  // The tokens of `piece`, or an empty span if it is not cached.
  std::span<const TokenId> find(std::string_view piece, std::uint64_t hash) const {
    if (slots_.empty()) return {};
    for (std::size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.value_length == 0) return {};
      if (slot.hash == hash && slot.key_length == piece.size() &&
          std::memcmp(keys_.data() + slot.key_offset, piece.data(), piece.size()) == 0)
        return {values_.data() + slot.value_offset, slot.value_length};
    }
  }

  void insert(std::string_view piece, std::uint64_t hash, std::span<const TokenId> ids);

  static std::uint64_t hash(std::string_view piece) {
    std::uint64_t h = 0x9E3779B97F4A7C15ull ^ (piece.size() * 0xBF58476D1CE4E5B9ull);
    const char* p = piece.data();
    std::size_t n = piece.size();
    while (n >= 8) {
      std::uint64_t word;
      std::memcpy(&word, p, 8);
      h = (h ^ word) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 29;
      p += 8;
      n -= 8;
    }
    std::uint64_t word = 0;
    std::memcpy(&word, p, n);
    h = (h ^ word) * 0x94D049BB133111EBull;
    return h ^ (h >> 31);
  }

 private:
  struct Slot {
    std::uint64_t hash;
    std::uint32_t key_offset, value_offset;
    std::uint16_t key_length, value_length;  // value_length 0: free slot (a piece has at least one token)
  };
  void clear_and_resize(std::size_t slots);

  std::vector<Slot> slots_;
  std::size_t mask_ = 0, used_ = 0;
  std::string keys_;
  std::vector<TokenId> values_;
};

}  // namespace dew::data
