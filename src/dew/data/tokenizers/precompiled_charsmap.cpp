#include "dew/data/tokenizers/precompiled_charsmap.h"

#include <cstring>

#include <utf8proc.h>

#include "dew/core/error.h"
#include "dew/data/tokenizers/unicode_text.h"

namespace dew::data {
namespace {

// Darts-clone unit fields.
bool has_leaf(std::uint32_t unit) { return (unit >> 8) & 1; }
std::uint32_t value(std::uint32_t unit) { return unit & ((1u << 31) - 1); }
std::uint32_t label(std::uint32_t unit) { return unit & ((1u << 31) | 0xFF); }
std::uint32_t offset(std::uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

}  // namespace

PrecompiledCharsmap::PrecompiledCharsmap(std::string_view blob, const std::string& where) {
  if (blob.size() < 4) fail(where, ": the precompiled charsmap has ", blob.size(), " bytes; it needs at least 4");
  std::uint32_t trie_bytes = 0;
  std::memcpy(&trie_bytes, blob.data(), 4);  // little-endian, as every platform dew runs on
  if (trie_bytes % 4 != 0 || trie_bytes > blob.size() - 4 || trie_bytes == 0)
    fail(where, ": the precompiled charsmap says its trie has ", trie_bytes, " bytes, but the blob has ",
         blob.size() - 4, " after the size; the charsmap is corrupt");
  units_.resize(trie_bytes / 4);
  std::memcpy(units_.data(), blob.data() + 4, trie_bytes);
  strings_.assign(blob.substr(4 + trie_bytes));
}

std::optional<std::string_view> PrecompiledCharsmap::transform(std::string_view chunk) const {
  std::size_t node = offset(units_[0]);
  for (unsigned char c : chunk) {
    if (c == 0) break;
    node ^= c;
    if (node >= units_.size() || label(units_[node]) != c) return std::nullopt;
    bool leaf = has_leaf(units_[node]);
    node ^= offset(units_[node]);
    if (node >= units_.size()) return std::nullopt;
    if (leaf) {  // the shortest key that is a prefix: its value sits at the children's base
      std::size_t at = value(units_[node]);
      if (at >= strings_.size()) return std::nullopt;
      std::size_t end = strings_.find('\0', at);
      return std::string_view(strings_).substr(at, (end == std::string::npos ? strings_.size() : end) - at);
    }
  }
  return std::nullopt;
}

std::string PrecompiledCharsmap::normalize(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) {
    // One grapheme cluster: characters up to the next break utf8proc finds.
    std::size_t end = pos, n = 0;
    utf8proc_int32_t state = 0;
    char32_t previous = utf8_char_at(text, end, n);
    end += n;
    while (end < text.size()) {
      char32_t next = utf8_char_at(text, end, n);
      if (utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(previous),
                                           static_cast<utf8proc_int32_t>(next), &state))
        break;
      previous = next;
      end += n;
    }
    std::string_view grapheme = text.substr(pos, end - pos);
    pos = end;
    if (grapheme.size() < 6) {
      if (auto replacement = transform(grapheme)) {
        out += *replacement;
        continue;
      }
    }
    for (std::size_t at = 0; at < grapheme.size(); at += n) {
      n = utf8_char_length(grapheme, at);
      std::string_view character = grapheme.substr(at, n);
      if (auto replacement = transform(character)) out += *replacement;
      else out += character;
    }
  }
  return out;
}

}  // namespace dew::data
