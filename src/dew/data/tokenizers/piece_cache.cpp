#include "dew/data/tokenizers/piece_cache.h"

namespace dew::data {
namespace {
constexpr std::size_t kInitialSlots = 1 << 12;
constexpr std::size_t kMaxSlots = 1 << 20;  // about a million distinct pieces, ~40 MB with the arenas
}  // namespace

void PieceCache::clear_and_resize(std::size_t slots) {
  slots_.assign(slots, Slot{0, 0, 0, 0, 0});
  mask_ = slots - 1;
  used_ = 0;
  keys_.clear();
  values_.clear();
}

void PieceCache::insert(std::string_view piece, std::uint64_t hash, std::span<const TokenId> ids) {
  if (piece.size() > kMaxPieceBytes || ids.empty() || ids.size() > kMaxPieceBytes) return;
  if (slots_.empty()) clear_and_resize(kInitialSlots);
  if ((used_ + 1) * 2 > slots_.size()) {
    if (slots_.size() >= kMaxSlots) {
      clear_and_resize(slots_.size());  // full: start over rather than grow without bound
    } else {
      // Grow: rehash the existing entries into a table twice the size (the arenas stay).
      std::vector<Slot> old = std::move(slots_);
      slots_.assign(old.size() * 2, Slot{0, 0, 0, 0, 0});
      mask_ = slots_.size() - 1;
      for (const Slot& slot : old) {
        if (slot.value_length == 0) continue;
        std::size_t i = slot.hash & mask_;
        while (slots_[i].value_length != 0) i = (i + 1) & mask_;
        slots_[i] = slot;
      }
    }
  }
  std::size_t i = hash & mask_;
  while (slots_[i].value_length != 0) i = (i + 1) & mask_;
  slots_[i] = Slot{hash, static_cast<std::uint32_t>(keys_.size()), static_cast<std::uint32_t>(values_.size()),
                   static_cast<std::uint16_t>(piece.size()), static_cast<std::uint16_t>(ids.size())};
  keys_.append(piece);
  values_.insert(values_.end(), ids.begin(), ids.end());
  ++used_;
}

}  // namespace dew::data
