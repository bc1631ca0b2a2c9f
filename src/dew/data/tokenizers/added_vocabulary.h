#pragma once
// tokenizer.json's added_tokens as Hugging Face matches them before the model sees the text: the longest
// token at the leftmost place, then non-overlapping after it. A normalized token is matched in the
// normalized text (its content normalized too); the others in the raw text. single_word: only where no
// letter, digit or '_' touches it; lstrip/rstrip: the whitespace before/after it belongs to the token.
// Special tokens match only when the caller allows them (Tokenizer::encode's allow_special).
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dew/data/tokenizers/normalizer.h"
#include "dew/data/tokenizers/tokenizer.h"

namespace dew::data {

struct AddedTokenSpec {
  std::string content;
  TokenId id = 0;
  bool special = false, lstrip = false, rstrip = false, single_word = false, normalized = false;
};

// A stretch of text: an added token's id, or text for the next stage.
struct TextSegment {
  std::size_t start, end;
  std::optional<TokenId> id;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // normalizer (may be null) turns the contents of normalized tokens into the form they are matched in.
  AddedVocabulary(std::vector<AddedTokenSpec> tokens, const Normalizer* normalizer);

  const std::vector<AddedTokenSpec>& tokens() const { return tokens_; }
  const AddedTokenSpec* find_id(TokenId id) const;

  // Segments tiling text, by the raw-text tokens (normalized=false) or the normalized ones.
  std::vector<TextSegment> split(std::string_view text, bool normalized, bool allow_special) const;

 private:
  struct Pattern {
    std::string text;
    std::size_t token;  // index into tokens_
  };
  std::vector<AddedTokenSpec> tokens_;
  std::vector<Pattern> raw_, normalized_;  // longest first
  std::array<bool, 256> raw_first_{}, normalized_first_{};  // first bytes of the patterns: a quick skip
};

}  // namespace dew::data
