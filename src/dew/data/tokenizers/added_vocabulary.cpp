#include "dew/data/tokenizers/added_vocabulary.h"

#include <algorithm>

#include "dew/data/tokenizers/unicode_text.h"

namespace dew::data {
namespace {

bool is_word_character(char32_t c) { return c == '_' || is_unicode_alphanumeric(c); }

// The last character before `at`, and the first at `at`.
char32_t char_before(std::string_view text, std::size_t at) {
  std::size_t start = at - 1, n = 0;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return utf8_char_at(text, start, n);
}

// Where the whitespace run that ends at `at` starts.
std::size_t whitespace_start_before(std::string_view text, std::size_t at) {
  while (at > 0) {
    std::size_t start = at - 1, n = 0;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    if (!is_unicode_whitespace(utf8_char_at(text, start, n))) break;
    at = start;
  }
  return at;
}

std::size_t whitespace_end_after(std::string_view text, std::size_t at) {
  std::size_t n = 0;
  while (at < text.size() && is_unicode_whitespace(utf8_char_at(text, at, n))) at += n;
  return at;
}

}  // namespace

AddedVocabulary::AddedVocabulary(std::vector<AddedTokenSpec> tokens, const Normalizer* normalizer)
    : tokens_(std::move(tokens)) {
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    const AddedTokenSpec& token = tokens_[i];
    if (token.content.empty()) continue;
    if (token.normalized && normalizer) normalized_.push_back({normalizer->normalize(token.content), i});
    else (token.normalized ? normalized_ : raw_).push_back({token.content, i});
  }
  auto longest_first = [](const Pattern& a, const Pattern& b) { return a.text.size() > b.text.size(); };
  std::stable_sort(raw_.begin(), raw_.end(), longest_first);
  std::stable_sort(normalized_.begin(), normalized_.end(), longest_first);
  for (const Pattern& p : raw_) raw_first_[static_cast<unsigned char>(p.text[0])] = true;
  for (const Pattern& p : normalized_) normalized_first_[static_cast<unsigned char>(p.text[0])] = true;
}

const AddedTokenSpec* AddedVocabulary::find_id(TokenId id) const {
  for (const AddedTokenSpec& token : tokens_)
    if (token.id == id) return &token;
  return nullptr;
}

std::vector<TextSegment> AddedVocabulary::split(std::string_view text, bool normalized, bool allow_special) const {
  const std::vector<Pattern>& patterns = normalized ? normalized_ : raw_;
  const std::array<bool, 256>& first = normalized ? normalized_first_ : raw_first_;
  std::vector<TextSegment> out;
  std::size_t done = 0, search = 0;
  while (!patterns.empty() && search < text.size()) {
    // The leftmost place any token matches, and the longest token there.
    const Pattern* hit = nullptr;
    std::size_t at = search;
    for (; at < text.size() && !hit; ++at) {
      if (!first[static_cast<unsigned char>(text[at])]) continue;
      for (const Pattern& p : patterns) {
        if (tokens_[p.token].special && !allow_special) continue;
        if (text.compare(at, p.text.size(), p.text) == 0) {
          hit = &p;
          break;
        }
      }
    }
    if (!hit) break;
    std::size_t start = at - 1, stop = start + hit->text.size();
    search = stop;
    const AddedTokenSpec& token = tokens_[hit->token];
    if (token.single_word && ((start > 0 && is_word_character(char_before(text, start))) ||
                              (stop < text.size() && is_word_character([&] {
                                 std::size_t n = 0;
                                 return utf8_char_at(text, stop, n);
                               }()))))
      continue;
    if (token.lstrip) start = std::max(whitespace_start_before(text, start), done);
    if (token.rstrip) stop = whitespace_end_after(text, stop);
    if (start > done) out.push_back({done, start, std::nullopt});
    out.push_back({start, stop, token.id});
    done = search = stop;
  }
  if (done < text.size() || out.empty()) out.push_back({done, text.size(), std::nullopt});
  return out;
}

}  // namespace dew::data
