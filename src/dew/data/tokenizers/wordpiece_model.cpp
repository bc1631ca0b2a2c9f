// WordPiece (BERT): the longest vocabulary prefix of the word, then the longest "##"-prefixed continuation,
// and so on; if some position has none, the whole word is unk. WordLevel: the word's id, or unk.
#include "dew/core/error.h"
#include "dew/data/tokenizers/token_model.h"
#include "dew/data/tokenizers/unicode_text.h"

namespace dew::data {
namespace {

class WordPieceModel final : public TokenModel {
 public:
  WordPieceModel(Vocabulary vocabulary, TokenId unk_id, std::string prefix, std::size_t max_chars)
      : vocabulary_(std::move(vocabulary)), unk_id_(unk_id), prefix_(std::move(prefix)), max_chars_(max_chars) {}

  const Vocabulary& vocabulary() const override { return vocabulary_; }

  void tokenize(std::string_view word, std::vector<TokenId>& out) const override {
    std::size_t chars = 0;
    for (std::size_t pos = 0; pos < word.size(); pos += utf8_char_length(word, pos)) ++chars;
    if (chars > max_chars_) return out.push_back(unk_id_);
    std::size_t before = out.size();
    std::string candidate;
    for (std::size_t start = 0; start < word.size();) {
      std::size_t end = word.size();
      std::optional<TokenId> found;
      while (start < end) {
        candidate.assign(start > 0 ? prefix_ : "").append(word.substr(start, end - start));
        if ((found = vocabulary_.find(candidate))) break;
        --end;  // back one character
        while (end > start && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) --end;
      }
      if (!found) {
        out.resize(before);
        return out.push_back(unk_id_);
      }
      out.push_back(*found);
      start = end;
    }
  }

 private:
  Vocabulary vocabulary_;
  TokenId unk_id_;
  std::string prefix_;
  std::size_t max_chars_;
};

class WordLevelModel final : public TokenModel {
 public:
  WordLevelModel(Vocabulary vocabulary, TokenId unk_id) : vocabulary_(std::move(vocabulary)), unk_id_(unk_id) {}
  const Vocabulary& vocabulary() const override { return vocabulary_; }
  void tokenize(std::string_view word, std::vector<TokenId>& out) const override {
    out.push_back(vocabulary_.find(word).value_or(unk_id_));
  }

 private:
  Vocabulary vocabulary_;
  TokenId unk_id_;
};

}  // namespace

TokenModelPtr make_wordpiece_model(Vocabulary vocabulary, std::string unk_token, std::string prefix,
                                   std::size_t max_chars_per_word, const std::string& where) {
  auto unk = vocabulary.find(unk_token);
  if (!unk) fail(where, ": field 'model.unk_token' is '", unk_token, "', which is not a token of model.vocab");
  return std::make_unique<WordPieceModel>(std::move(vocabulary), *unk, std::move(prefix), max_chars_per_word);
}

TokenModelPtr make_wordlevel_model(Vocabulary vocabulary, std::string unk_token, const std::string& where) {
  auto unk = vocabulary.find(unk_token);
  if (!unk) fail(where, ": field 'model.unk_token' is '", unk_token, "', which is not a token of model.vocab");
  return std::make_unique<WordLevelModel>(std::move(vocabulary), *unk);
}

}  // namespace dew::data
