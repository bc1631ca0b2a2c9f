#pragma once
// Unicode for tokenizers, from utf8proc (Debian's libutf8proc): normalization forms, case mapping and the
// character classes Hugging Face tokenizers test with Rust's char methods. Text is UTF-8; invalid UTF-8 is
// passed through unchanged by the transforms, since no published tokenizer defines what to do with it.
#include <cstddef>
#include <string>
#include <string_view>

namespace dew::data {

enum class NormalForm { NFC, NFD, NFKC, NFKD };
std::string unicode_normalize(std::string_view text, NormalForm form);
// Rust's char::to_lowercase per character, as Hugging Face's Lowercase applies it: utf8proc's simple mapping,
// and U+0130 to "i" + U+0307 (its one multi-character mapping; no final-sigma rule, as per character).
std::string unicode_lowercase(std::string_view text);
// Drops combining marks (category Mn), as Hugging Face's StripAccents does after NFD.
std::string strip_accents(std::string_view text);

// The code point at text[pos] and its length in bytes; an invalid byte reads as itself with length 1.
char32_t utf8_char_at(std::string_view text, std::size_t pos, std::size_t& length);
std::size_t utf8_char_length(std::string_view text, std::size_t pos);
void append_utf8(std::string& out, char32_t c);

bool is_unicode_whitespace(char32_t c);   // Rust char::is_whitespace (the White_Space property)
bool is_unicode_punctuation(char32_t c);  // ASCII punctuation or categories P* (Hugging Face's Punctuation)
bool is_unicode_numeric(char32_t c);      // Nd, Nl, No (Rust char::is_numeric)
bool is_unicode_alphanumeric(char32_t c); // L* or N* (Rust char::is_alphanumeric)
bool is_unicode_control(char32_t c);      // Cc, Cf, Cn, Co (BertNormalizer's clean_text drops these)
bool is_cjk_ideograph(char32_t c);        // the CJK blocks BERT puts spaces around

}  // namespace dew::data
