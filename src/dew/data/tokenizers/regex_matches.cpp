#include "dew/data/tokenizers/regex_matches.h"

#include "dew/core/error.h"

namespace dew::data {

std::string with_word_class(std::string_view pattern, WordClass word_class) {
  std::string word = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc})";
  word += word_class == WordClass::Oniguruma ? R"(\x{AA}\x{B2}\x{B3}\x{B5}\x{B9}\x{BA}\x{BC}-\x{BE})" : R"(\x{200C}\x{200D})";
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char next = pattern[++i];
      if (next == 'w') out += in_class ? word : "[" + word + "]";
      else if (next == 'W' && !in_class) out += "[^" + word + "]";
      else out.append(1, c).append(1, next);
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];  // a literal ] first in the class
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

TextPattern::TextPattern(const JsonFields& f, const nlohmann::json& node, const std::string& where,
                         WordClass word_class) {
  f.object(node, where);
  if (const auto* literal = f.find(node, "String")) {
    literal_ = f.string(*literal, where + ".String");
    if (literal_.empty()) f.fail_at(where + ".String", "is empty; a pattern must match something");
  } else if (const auto* regex = f.find(node, "Regex")) {
    std::string pattern = with_word_class(f.string(*regex, where + ".Regex"), word_class);
    try {
      regex_ = std::make_shared<const PreTokenizer>(std::vector<std::string>{pattern});
    } catch (const Error& e) {
      f.fail_at(where + ".Regex", e.what());
    }
  } else {
    f.fail_at(where, str("must hold \"String\" or \"Regex\", not ", node.dump()));
  }
}

TextPattern TextPattern::literal(std::string text) {
  TextPattern pattern;
  pattern.literal_ = std::move(text);
  return pattern;
}

std::vector<std::pair<std::size_t, std::size_t>> TextPattern::matches(std::string_view text) const {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  if (!regex_) {
    for (std::size_t at = text.find(literal_); at != std::string_view::npos; at = text.find(literal_, at + literal_.size()))
      out.emplace_back(at, at + literal_.size());
    return out;
  }
  std::size_t search = 0, start = 0, end = 0;
  while (search < text.size() && regex_->find(0, text, search, start, end)) {
    if (end == start) {  // an empty match: search on from the next character
      search = start + 1;
      while (search < text.size() && (static_cast<unsigned char>(text[search]) & 0xC0) == 0x80) ++search;
      continue;
    }
    out.emplace_back(start, end);
    search = end;
  }
  return out;
}

std::string TextPattern::replace_all(std::string_view text, std::string_view content) const {
  std::string out;
  std::size_t last = 0;
  for (auto [start, end] : matches(text)) {
    out.append(text.substr(last, start - last)).append(content);
    last = end;
  }
  out.append(text.substr(last));
  return out;
}

}  // namespace dew::data
