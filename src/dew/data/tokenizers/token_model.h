#pragma once
// tokenizer.json models: one pre-tokenized piece -> token ids. BPE (bpe_model.cpp: merges by rank, or
// SentencePiece's merges by score; byte_fallback, ignore_merges, continuing_subword_prefix, end_of_word_suffix,
// unk), Unigram (unigram_model.cpp: Viterbi over scored pieces), WordPiece and WordLevel (wordpiece_model.cpp).
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/data/tokenizers/json_fields.h"
#include "dew/data/tokenizers/tokenizer.h"

namespace dew::data {

// id <-> token text, shared by the models.
struct Vocabulary {
  std::vector<std::string> tokens;  // id -> text; "" for an id no token has
  std::unordered_map<std::string, TokenId> ids;

  std::optional<TokenId> find(std::string_view token) const {
    auto it = ids.find(std::string(token));
    return it == ids.end() ? std::nullopt : std::optional<TokenId>(it->second);
  }
  void add(std::string token, TokenId id);  // grows tokens; a repeated token keeps its first id
};

class TokenModel {
 public:
  virtual ~TokenModel() = default;
  virtual void tokenize(std::string_view piece, std::vector<TokenId>& out) const = 0;
  virtual const Vocabulary& vocabulary() const = 0;
};
using TokenModelPtr = std::unique_ptr<const TokenModel>;

// The "model" node (types BPE, Unigram, WordPiece, WordLevel). Errors name fields.path, the field and value.
TokenModelPtr read_token_model(const JsonFields& fields, const nlohmann::json& node);

// The byte-fallback token of a byte: "<0x0A>".
std::string byte_fallback_token(unsigned char byte);

struct BpeModelOptions {
  std::optional<std::string> unk_token;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  std::string continuing_subword_prefix, end_of_word_suffix;
};
// BPE from merges in rank order (pairs of token texts).
TokenModelPtr make_bpe_model(Vocabulary vocabulary, const std::vector<std::pair<std::string, std::string>>& merges,
                             BpeModelOptions options, const std::string& where);
// SentencePiece's BPE (llama.cpp's "llama" vocabularies): two adjacent pieces merge when their concatenation
// is a token, the highest-scoring concatenation first (the leftmost of equals).
TokenModelPtr make_scored_bpe_model(Vocabulary vocabulary, std::vector<float> scores, BpeModelOptions options);
// Unigram: pieces and their log-probabilities; unk_id for text no piece covers.
TokenModelPtr make_unigram_model(std::vector<std::pair<std::string, double>> pieces, std::optional<TokenId> unk_id,
                                 bool byte_fallback);
// WordPiece: greedy longest match, `prefix` on pieces after the first, the whole word unk when one fails.
TokenModelPtr make_wordpiece_model(Vocabulary vocabulary, std::string unk_token, std::string prefix,
                                   std::size_t max_chars_per_word, const std::string& where);
TokenModelPtr make_wordlevel_model(Vocabulary vocabulary, std::string unk_token, const std::string& where);

}  // namespace dew::data
