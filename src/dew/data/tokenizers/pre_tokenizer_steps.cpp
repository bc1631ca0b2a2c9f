// The tokenizer.json pre-tokenizers, one class per Hugging Face type, and the table that reads them.
#include "dew/core/error.h"
#include "dew/data/tokenizers/component_table.h"
#include "dew/data/tokenizers/byte_level.h"
#include "dew/data/tokenizers/pre_tokenizer_step.h"
#include "dew/data/tokenizers/pretokenizer.h"
#include "dew/data/tokenizers/regex_matches.h"
#include "dew/data/tokenizers/unicode_text.h"

namespace dew::data {
namespace {

using nlohmann::json;

// A step that splits every piece by the matches of something, with a behavior.
template <class FindMatches>
std::vector<PrePiece> split_each(std::vector<PrePiece> pieces, FindMatches find, SplitBehavior behavior, bool invert) {
  std::vector<PrePiece> out;
  out.reserve(pieces.size());
  for (const PrePiece& piece : pieces) split_piece(piece, find(piece.text), behavior, invert, out);
  return out;
}

class PatternSplit final : public PreTokenizerStep {
 public:
  PatternSplit(TextPattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  std::vector<PrePiece> apply(std::vector<PrePiece> pieces) const override {
    return split_each(std::move(pieces), [&](const std::string& text) { return pattern_.matches(text); }, behavior_,
                      invert_);
  }

 private:
  TextPattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// Digits, Punctuation, WhitespaceSplit, CharDelimiterSplit: a character class and a behavior.
class CharacterSplit final : public PreTokenizerStep {
 public:
  using Predicate = bool (*)(char32_t, char32_t);
  CharacterSplit(Predicate predicate, char32_t argument, SplitBehavior behavior)
      : predicate_(predicate), argument_(argument), behavior_(behavior) {}
  std::vector<PrePiece> apply(std::vector<PrePiece> pieces) const override {
    return split_each(std::move(pieces), [&](const std::string& text) {
      return character_matches(text, [&](char32_t c) { return predicate_(c, argument_); });
    }, behavior_, false);
  }

 private:
  Predicate predicate_;
  char32_t argument_;
  SplitBehavior behavior_;
};

bool numeric(char32_t c, char32_t) { return is_unicode_numeric(c); }
bool punctuation(char32_t c, char32_t) { return is_unicode_punctuation(c); }
bool whitespace(char32_t c, char32_t) { return is_unicode_whitespace(c); }
bool equals(char32_t c, char32_t delimiter) { return c == delimiter; }

class Metaspace final : public PreTokenizerStep {
 public:
  Metaspace(std::string replacement, std::string scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(std::move(scheme)), split_(split) {}
  std::vector<PrePiece> apply(std::vector<PrePiece> pieces) const override {
    auto space = TextPattern::literal(" ");
    for (PrePiece& piece : pieces) {
      piece.text = space.replace_all(piece.text, replacement_);
      bool prepend = scheme_ == "always" || (scheme_ == "first" && piece.at_text_start);
      if (prepend && !piece.text.starts_with(replacement_)) piece.text.insert(0, replacement_);
    }
    if (!split_) return pieces;
    auto marker = TextPattern::literal(replacement_);
    return split_each(std::move(pieces), [&](const std::string& text) { return marker.matches(text); },
                      SplitBehavior::MergedWithNext, false);
  }

 private:
  std::string replacement_, scheme_;
  bool split_;
};

// GPT-2's byte-level step: an optional leading space, GPT-2's regex, then every byte written as its
// byte-level character, which is the alphabet the vocabulary is spelled in.
class ByteLevel final : public PreTokenizerStep {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), regex_(use_regex ? std::vector<std::string>{std::string(kGpt2Pattern)}
                                                               : std::vector<std::string>{}) {}
  std::vector<PrePiece> apply(std::vector<PrePiece> pieces) const override {
    std::vector<PrePiece> out;
    for (PrePiece& piece : pieces) {
      if (add_prefix_space_ && !piece.text.starts_with(' ')) piece.text.insert(0, " ");
      bool first = true;
      regex_.for_each_piece(piece.text, [&](std::string_view part) {
        out.push_back(PrePiece{to_byte_level(part), piece.at_text_start && first});
        first = false;
      });
    }
    return out;
  }

 private:
  bool add_prefix_space_;
  PreTokenizer regex_;
};

class BertPreTokenizer final : public PreTokenizerStep {
 public:
  std::vector<PrePiece> apply(std::vector<PrePiece> pieces) const override {
    pieces = CharacterSplit(whitespace, 0, SplitBehavior::Removed).apply(std::move(pieces));
    return CharacterSplit(punctuation, 0, SplitBehavior::Isolated).apply(std::move(pieces));
  }
};

class Sequence final : public PreTokenizerStep {
 public:
  explicit Sequence(std::vector<PreTokenizerStepPtr> steps) : steps_(std::move(steps)) {}
  std::vector<PrePiece> apply(std::vector<PrePiece> pieces) const override {
    for (const auto& step : steps_) pieces = step->apply(std::move(pieces));
    return pieces;
  }

 private:
  std::vector<PreTokenizerStepPtr> steps_;
};

SplitBehavior read_behavior(const JsonFields& f, const json& node, const std::string& where, const char* fallback) {
  std::string name = f.string_or(node, "behavior", fallback, where + ".behavior");
  for (auto [text, behavior] : {std::pair{"Removed", SplitBehavior::Removed}, {"Isolated", SplitBehavior::Isolated},
                                {"MergedWithPrevious", SplitBehavior::MergedWithPrevious},
                                {"MergedWithNext", SplitBehavior::MergedWithNext},
                                {"Contiguous", SplitBehavior::Contiguous}})
    if (name == text) return behavior;
  f.fail_at(where + ".behavior", str("is \"", name, "\"; supported: Removed, Isolated, MergedWithPrevious, "
                                     "MergedWithNext, Contiguous"));
}

// Metaspace's prepend_scheme, or the older add_prefix_space flag it replaced.
std::string read_prepend_scheme(const JsonFields& f, const json& node, const std::string& where) {
  if (f.find(node, "prepend_scheme")) {
    std::string scheme = f.string(node["prepend_scheme"], where + ".prepend_scheme");
    if (scheme != "always" && scheme != "first" && scheme != "never")
      f.fail_at(where + ".prepend_scheme", str("is \"", scheme, "\"; supported: always, first, never"));
    return scheme;
  }
  return f.boolean_or(node, "add_prefix_space", true, where + ".add_prefix_space") ? "always" : "never";
}

std::string read_metaspace_replacement(const JsonFields& f, const json& node, const std::string& where) {
  std::string replacement = f.string_or(node, "replacement", "\xE2\x96\x81", where + ".replacement");
  if (replacement.empty() || utf8_char_length(replacement, 0) != replacement.size())
    f.fail_at(where + ".replacement", str("is \"", replacement, "\"; it must be one character"));
  return replacement;
}

using Row = ComponentRow<PreTokenizerStepPtr>;

const std::vector<Row>& table() {
  static const std::vector<Row> rows = {
      {"Metaspace", [](const JsonFields& f, const json& node, const std::string& where) -> PreTokenizerStepPtr {
         return make_metaspace(read_metaspace_replacement(f, node, where), read_prepend_scheme(f, node, where),
                               f.boolean_or(node, "split", true, where + ".split")); }},
      {"ByteLevel", [](const JsonFields& f, const json& node, const std::string& where) -> PreTokenizerStepPtr {
         return std::make_unique<ByteLevel>(f.boolean_or(node, "add_prefix_space", true, where + ".add_prefix_space"),
                                            f.boolean_or(node, "use_regex", true, where + ".use_regex")); }},
      {"Split", [](const JsonFields& f, const json& node, const std::string& where) -> PreTokenizerStepPtr {
         return std::make_unique<PatternSplit>(TextPattern(f, f.need(node, "pattern", where + ".pattern"), where + ".pattern"),
                                               read_behavior(f, node, where, "Isolated"),
                                               f.boolean_or(node, "invert", false, where + ".invert")); }},
      {"Digits", [](const JsonFields& f, const json& node, const std::string& where) -> PreTokenizerStepPtr {
         bool each = f.boolean_or(node, "individual_digits", false, where + ".individual_digits");
         return std::make_unique<CharacterSplit>(numeric, 0, each ? SplitBehavior::Isolated : SplitBehavior::Contiguous); }},
      {"Punctuation", [](const JsonFields& f, const json& node, const std::string& where) -> PreTokenizerStepPtr {
         return std::make_unique<CharacterSplit>(punctuation, 0, read_behavior(f, node, where, "Isolated")); }},
      {"Whitespace", [](const JsonFields& f, const json&, const std::string& where) -> PreTokenizerStepPtr {
         // Hugging Face keeps the runs of \w+ and [^\w\s]+ and drops what lies between them.
         return std::make_unique<PatternSplit>(TextPattern(f, json{{"Regex", R"(\w+|[^\w\s]+)"}}, where, WordClass::RustRegex),
                                               SplitBehavior::Removed, true); }},
      {"WhitespaceSplit", [](const JsonFields&, const json&, const std::string&) -> PreTokenizerStepPtr {
         return std::make_unique<CharacterSplit>(whitespace, 0, SplitBehavior::Removed); }},
      {"BertPreTokenizer", [](const JsonFields&, const json&, const std::string&) -> PreTokenizerStepPtr {
         return std::make_unique<BertPreTokenizer>(); }},
      {"CharDelimiterSplit", [](const JsonFields& f, const json& node, const std::string& where) -> PreTokenizerStepPtr {
         std::string delimiter = f.string(f.need(node, "delimiter", where + ".delimiter"), where + ".delimiter");
         std::size_t n = 0;
         if (delimiter.empty() || (utf8_char_at(delimiter, 0, n), n != delimiter.size()))
           f.fail_at(where + ".delimiter", str("is \"", delimiter, "\"; it must be one character"));
         return std::make_unique<CharacterSplit>(equals, utf8_char_at(delimiter, 0, n), SplitBehavior::Removed); }},
      {"Sequence", [](const JsonFields& f, const json& node, const std::string& where) -> PreTokenizerStepPtr {
         return std::make_unique<Sequence>(read_component_list<PreTokenizerStepPtr>(f, node, "pretokenizers", where, read_pre_tokenizer_step)); }},
  };
  return rows;
}

}  // namespace

PreTokenizerStepPtr make_metaspace(std::string replacement, std::string prepend_scheme, bool split) {
  return std::make_unique<Metaspace>(std::move(replacement), std::move(prepend_scheme), split);
}

PreTokenizerStepPtr read_pre_tokenizer_step(const JsonFields& fields, const json& node, const std::string& where) {
  return read_component(table(), fields, node, where);
}

}  // namespace dew::data
