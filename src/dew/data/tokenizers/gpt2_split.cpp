#include "dew/data/tokenizers/gpt2_split.h"

#include <array>
#include <cstdint>

namespace dew::data {
namespace {

// ASCII classes as PCRE2 with UCP sees them: \p{L}, \p{N}, \s (tab, LF, VT, FF, CR, space), and the rest,
// which [^\s\p{L}\p{N}] matches (punctuation and control characters). kHigh: not ASCII, undecided.
enum Class : std::uint8_t { kOther, kLetter, kDigit, kSpace, kHigh };

constexpr std::array<std::uint8_t, 256> make_classes() {
  std::array<std::uint8_t, 256> table{};
  for (int c = 0; c < 256; ++c) {
    if (c >= 0x80) table[c] = kHigh;
    else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) table[c] = kLetter;
    else if (c >= '0' && c <= '9') table[c] = kDigit;
    else if (c == ' ' || (c >= '\t' && c <= '\r')) table[c] = kSpace;
    else table[c] = kOther;
  }
  return table;
}
constexpr std::array<std::uint8_t, 256> kClasses = make_classes();

inline std::uint8_t class_at(std::string_view text, std::size_t i) {
  return kClasses[static_cast<unsigned char>(text[i])];
}

// The end of the run of class `c` from i, or 0 if a non-ASCII byte could continue it.
inline std::size_t run_end(std::string_view text, std::size_t i, std::uint8_t c) {
  for (; i < text.size(); ++i) {
    std::uint8_t k = class_at(text, i);
    if (k == c) continue;
    return k == kHigh ? 0 : i;
  }
  return i;
}

}  // namespace

std::size_t gpt2_ascii_match_end(std::string_view text, std::size_t pos) {
  const std::size_t n = text.size();
  switch (class_at(text, pos)) {
    case kLetter:  // ` ?\p{L}+`
      return run_end(text, pos + 1, kLetter);
    case kDigit:  // ` ?\p{N}+`
      return run_end(text, pos + 1, kDigit);
    case kOther:
      if (text[pos] == '\'' && pos + 1 < n) {  // 's 't 're 've 'm 'll 'd come first in the alternation
        char a = text[pos + 1];
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return pos + 2;
        if (pos + 2 < n) {
          char b = text[pos + 2];
          if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return pos + 3;
        }
      }
      return run_end(text, pos + 1, kOther);  // ` ?[^\s\p{L}\p{N}]+`
    case kSpace: {
      if (text[pos] == ' ' && pos + 1 < n) {  // a space joins a following letter, digit or other run
        std::uint8_t next = class_at(text, pos + 1);
        if (next == kHigh) return 0;
        if (next != kSpace) return run_end(text, pos + 2, next);
      }
      std::size_t end = run_end(text, pos + 1, kSpace);
      if (end == 0 || end == n) return end;  // `\s+(?!\S)` takes a run that ends the text
      // Followed by a non-space: `\s+(?!\S)` gives back the last space, which then starts the next piece;
      // a single space cannot give one back, so `\s+` takes it.
      return end - 1 > pos ? end - 1 : end;
    }
    default:
      return 0;
  }
}

}  // namespace dew::data
