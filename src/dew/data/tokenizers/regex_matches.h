#pragma once
// A pattern from tokenizer.json ({"String": ...} or {"Regex": ...}) and where it matches in a text, for the
// components that split or replace by one (Split, Replace). Regexes run on PCRE2 (UTF + UCP), which reads the
// Oniguruma patterns published tokenizers use the same way.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/data/tokenizers/json_fields.h"
#include "dew/data/tokenizers/pretokenizer.h"

namespace dew::data {

// Which engine's \w a pattern was written for. Hugging Face runs Split/Replace patterns on Oniguruma,
// whose \w is Alphabetic, marks, decimal digits and connector punctuation, plus the Latin-1 letters and
// number signs (ª ² ³ µ ¹ º ¼ ½ ¾); its Whitespace pre-tokenizer runs on Rust's regex, whose \w has the
// joiners (U+200C, U+200D) instead of those Latin-1 extras. PCRE2's own \w (letters and every number) is neither, so \w and \W are rewritten as classes.
enum class WordClass { Oniguruma, RustRegex };
std::string with_word_class(std::string_view pattern, WordClass word_class);

class TextPattern {
 public:
  // node: {"String": "..."} or {"Regex": "..."}; errors name `where`.
  TextPattern(const JsonFields& fields, const nlohmann::json& node, const std::string& where,
              WordClass word_class = WordClass::Oniguruma);
  static TextPattern literal(std::string text);

  // Non-overlapping matches, left to right, as [start, end); empty matches are skipped.
  std::vector<std::pair<std::size_t, std::size_t>> matches(std::string_view text) const;
  // text with every match replaced by `content`.
  std::string replace_all(std::string_view text, std::string_view content) const;

 private:
  TextPattern() = default;
  std::string literal_;
  std::shared_ptr<const PreTokenizer> regex_;  // one PCRE2 step; null for a literal
};

}  // namespace dew::data
