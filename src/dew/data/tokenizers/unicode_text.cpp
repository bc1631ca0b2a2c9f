#include "dew/data/tokenizers/unicode_text.h"

#include <cstdlib>
#include <memory>

#include <utf8proc.h>

namespace dew::data {

namespace {

// utf8proc_map over text; invalid UTF-8 (which utf8proc refuses) is returned unchanged.
std::string map_text(std::string_view text, int options) {
  if (text.empty()) return {};
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                    static_cast<utf8proc_ssize_t>(text.size()), &out,
                                    static_cast<utf8proc_option_t>(options));
  if (n < 0) return std::string(text);
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  return std::string(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
}

utf8proc_category_t category(char32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)); }

}  // namespace

std::string unicode_normalize(std::string_view text, NormalForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::NFC: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::NFD: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::NFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::NFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  return map_text(text, options);
}

char32_t utf8_char_at(std::string_view text, std::size_t pos, std::size_t& length) {
  utf8proc_int32_t c = 0;
  utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + pos),
                                        static_cast<utf8proc_ssize_t>(text.size() - pos), &c);
  if (n <= 0) {
    length = 1;
    return static_cast<unsigned char>(text[pos]);
  }
  length = static_cast<std::size_t>(n);
  return static_cast<char32_t>(c);
}

std::size_t utf8_char_length(std::string_view text, std::size_t pos) {
  std::size_t length = 1;
  utf8_char_at(text, pos, length);
  return length;
}

void append_utf8(std::string& out, char32_t c) {
  utf8proc_uint8_t buffer[4];
  utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buffer);
  out.append(reinterpret_cast<const char*>(buffer), static_cast<std::size_t>(n));
}

std::string unicode_lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t pos = 0, n = 0; pos < text.size(); pos += n) {
    char32_t c = utf8_char_at(text, pos, n);
    if (c < 0x80) out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    else if (n == 1 && c < 0x100 && (static_cast<unsigned char>(text[pos]) & 0x80)) out += text[pos];  // invalid byte
    else if (c == 0x130) out += "i\xCC\x87";  // İ: Rust's one multi-character lowercase, i + U+0307
    else append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
  }
  return out;
}

std::string strip_accents(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t pos = 0, n = 0; pos < text.size(); pos += n) {
    char32_t c = utf8_char_at(text, pos, n);
    if (category(c) != UTF8PROC_CATEGORY_MN) out.append(text.substr(pos, n));
  }
  return out;
}

bool is_unicode_whitespace(char32_t c) {
  if (c == ' ' || (c >= '\t' && c <= '\r') || c == 0x85) return true;
  auto k = category(c);
  return k == UTF8PROC_CATEGORY_ZS || k == UTF8PROC_CATEGORY_ZL || k == UTF8PROC_CATEGORY_ZP;
}

bool is_unicode_punctuation(char32_t c) {
  if (c < 0x80) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  auto k = category(c);
  return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

bool is_unicode_numeric(char32_t c) {
  auto k = category(c);
  return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

bool is_unicode_alphanumeric(char32_t c) {
  auto k = category(c);
  return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) || is_unicode_numeric(c);
}

bool is_unicode_control(char32_t c) {
  auto k = category(c);
  return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CN ||
         k == UTF8PROC_CATEGORY_CO;
}

bool is_cjk_ideograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

}  // namespace dew::data
