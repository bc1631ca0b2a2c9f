#pragma once
// The BPE merge loop: a piece's bytes start as one token each, and the adjacent pair with the lowest merge
// rank (the leftmost of equals) is merged until no pair has a rank. This is Hugging Face's BPE and
// tiktoken's rule; one merge at a time, so tokenizer files whose ranks are not in build order still agree.
#include <array>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace dew::data {

using TokenId = std::int32_t;

class BpeMerger {
 public:
  // byte_ids: the token of each single byte. merges: (left, right, merged) ids in rank order; a pair
  // listed twice keeps its last rank, as Hugging Face's loader does.
  BpeMerger(const std::array<TokenId, 256>& byte_ids, const std::vector<std::array<TokenId, 3>>& merges);

  // Appends the tokens of one piece to out.
  void merge(std::string_view piece, std::vector<TokenId>& out) const;

 private:
  struct Slot {
    std::uint64_t key;  // left << 32 | right; kEmpty marks a free slot
    std::int32_t rank;
    TokenId merged;
  };
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};

  // The merge of (left, right), or nullptr.
  const Slot* lookup(TokenId left, TokenId right) const {
    std::uint64_t key = (std::uint64_t(std::uint32_t(left)) << 32) | std::uint32_t(right);
    std::size_t i = (key * 0x9E3779B97F4A7C15ull) >> shift_;
    while (true) {
      const Slot& slot = slots_[i];
      if (slot.key == key) return &slot;
      if (slot.key == kEmpty) return nullptr;
      i = (i + 1) & (slots_.size() - 1);
    }
  }
  void merge_short(std::string_view piece, std::vector<TokenId>& out) const;
  void merge_long(std::string_view piece, std::vector<TokenId>& out) const;

  std::array<TokenId, 256> byte_ids_;
  std::vector<Slot> slots_;
  int shift_ = 64;
};

}  // namespace dew::data
