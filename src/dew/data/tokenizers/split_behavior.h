#pragma once
// How Hugging Face's pre-tokenizers turn the matches of a pattern in a piece into pieces: the match and gap
// segments tile the piece, then the behavior decides which are kept and what joins what.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace dew::data {

// A piece of text on its way to the model; at_text_start: it begins at offset 0 of the input text (what
// Metaspace's prepend_scheme "first" asks).
struct PrePiece {
  std::string text;
  bool at_text_start = false;
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// matches: non-overlapping [start, end) in piece.text, in order. invert: the gaps are the delimiters.
void split_piece(const PrePiece& piece, const std::vector<std::pair<std::size_t, std::size_t>>& matches,
                 SplitBehavior behavior, bool invert, std::vector<PrePiece>& out);

// Each character for which is_delimiter(c) holds is one match.
template <class Predicate>
std::vector<std::pair<std::size_t, std::size_t>> character_matches(const std::string& text, Predicate is_delimiter);

}  // namespace dew::data

#include "dew/data/tokenizers/unicode_text.h"

namespace dew::data {

template <class Predicate>
std::vector<std::pair<std::size_t, std::size_t>> character_matches(const std::string& text, Predicate is_delimiter) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (std::size_t pos = 0, n = 0; pos < text.size(); pos += n)
    if (is_delimiter(utf8_char_at(text, pos, n))) out.emplace_back(pos, pos + n);
  return out;
}

}  // namespace dew::data
