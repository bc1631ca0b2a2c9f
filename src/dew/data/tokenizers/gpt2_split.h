#pragma once
// A hand-written matcher for GPT-2's pre-tokenizer regex (kGpt2Pattern) on ASCII text: the regex engine's
// cost per piece is most of the time of encoding prose, and nearly all prose pieces are ASCII.
//
// It decides only matches whose outcome depends on ASCII bytes alone, and says "undecided" (0) as soon as
// it would have to look at a byte >= 0x80 (which might be a letter, a digit or a space in Unicode); the
// caller then asks PCRE2. tests/text_pretokenizer_test.cpp checks it against PCRE2 on every string of up
// to 4 characters over a representative alphabet and on random text.
#include <cstddef>
#include <string_view>

namespace dew::data {

// The end of GPT-2's regex match that starts at text[pos] (pos < text.size()), or 0 if undecided.
std::size_t gpt2_ascii_match_end(std::string_view text, std::size_t pos);

}  // namespace dew::data
