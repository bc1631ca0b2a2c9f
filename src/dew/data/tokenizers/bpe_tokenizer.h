#pragma once
// Byte-level BPE (GPT-2, SmolLM/SmolLM2, Llama 3, Qwen 2/3): text is split into pieces by a regex
// pre-tokenizer, each piece's bytes are merged by rank into tokens. Every byte has a token, so any byte
// string (invalid UTF-8 included) encodes, and decode(encode(x)) == x. (A vocabulary that lacks some
// single-byte tokens, like SmolLM2's, drops those bytes when encoding, as Hugging Face does.)
//
// Added tokens (tokenizer.json's added_tokens) are found first, leftmost-longest, as Hugging Face does:
// special ones only when encode(..., allow_special=true), the others always; an added token decodes to its
// content. Encoding adds no BOS/EOS (a post_processor is kept for save() but not applied).
//
// EOS rule: tokenizer_config.json's eos_token next to tokenizer.json, when there is one; otherwise the
// first of <|endoftext|>, <|end_of_text|>, <|im_end|>, </s> that is an added special token (then a vocabulary
// token); otherwise none. GPT-2's encoder.json + vocab.bpe: <|endoftext|> (and it is special).
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dew/data/tokenizers/bpe_merger.h"
#include "dew/data/tokenizers/pretokenizer.h"
#include "dew/data/tokenizers/tokenizer.h"

namespace dew::data {

struct AddedToken {
  std::string content;
  TokenId id;
  bool special;
};

// What a BPE trainer makes. Tokens and merges are raw bytes, not the byte-level text form.
struct BpeParts {
  std::vector<std::string> vocab;                           // id -> token as raw bytes
  std::vector<std::pair<std::string, std::string>> merges;  // rank order, raw bytes
  std::vector<AddedToken> added_tokens;
  std::string split_pattern{kGpt2Pattern};  // the pre-tokenizer regex (GPT-2's by default)
};

// A tokenizer in the form tokenizer.json stores it: tokens in GPT-2's byte-level text (byte_level.h).
struct BpeDefinition {
  std::vector<std::string> vocab;                           // id -> token; "" for an id no token has
  std::vector<std::pair<std::string, std::string>> merges;  // rank order
  std::vector<AddedToken> added_tokens;
  std::vector<std::string> split_patterns{std::string(kGpt2Pattern)};  // applied in order (PreTokenizer)
  bool ignore_merges = false;  // Llama 3: a piece that is a whole vocabulary token is not merged
  std::optional<TokenId> eos_id;  // nullopt: the default rule in the header comment
  // tokenizer.json's pre_tokenizer, post_processor and decoder as JSON text, written back by save();
  // empty: made from split_patterns (ByteLevel decoder, no post_processor).
  std::string pre_tokenizer_json, post_processor_json, decoder_json;
};

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(BpeParts parts, std::string name = "bpe");
  // Errors name `name` (the file it came from) and the tokenizer.json field at fault.
  BpeTokenizer(BpeDefinition definition, std::string name);
  ~BpeTokenizer() override;

  std::string name() const override { return name_; }
  std::int64_t vocab_size() const override { return static_cast<std::int64_t>(bytes_.size()); }
  std::optional<TokenId> eos_id() const override { return eos_id_; }
  std::vector<TokenId> encode(std::string_view text, bool allow_special = false) const override;
  std::string decode(std::span<const TokenId> ids) const override;
  // Writes tokenizer.json (loadable by Hugging Face `tokenizers`, same ids) and tokenizer_config.json
  // (eos_token), atomically; returns "tokenizer.json".
  std::string save(const std::filesystem::path& dir) const override;
  std::size_t safe_cut(std::string_view text, std::size_t from, std::size_t limit) const override;

  const BpeDefinition& definition() const { return definition_; }
  // The raw bytes of a token ("" for an unused id).
  const std::string& token_bytes(TokenId id) const { return bytes_.at(static_cast<std::size_t>(id)); }
  std::optional<TokenId> token_id(std::string_view raw_bytes) const;

 private:
  struct AddedMatch {
    std::size_t start, length;
    TokenId id;
  };
  // The leftmost-longest added token in text at or after `from` that allow_special admits.
  std::optional<AddedMatch> find_added(std::string_view text, std::size_t from, bool allow_special) const;
  void encode_ordinary(std::string_view text, std::vector<TokenId>& out) const;

  std::string name_;
  BpeDefinition definition_;
  std::vector<std::string> bytes_;  // id -> raw bytes
  std::vector<bool> present_;       // ids some token has
  std::unordered_map<std::string, TokenId> id_of_bytes_;
  std::array<TokenId, 256> byte_ids_{};  // -1: the vocabulary has no token for this byte (dropped when encoding)
  bool has_untokenized_bytes_ = false;
  std::unique_ptr<BpeMerger> merger_;
  PreTokenizer pre_tokenizer_;
  bool ignore_merges_ = false;
  std::optional<TokenId> eos_id_;
  std::vector<AddedToken> added_by_length_;  // longest first
  std::array<bool, 256> added_first_byte_{}, special_first_byte_{};  // quick rejection while scanning
  bool has_plain_added_ = false, has_special_added_ = false;
  std::uint64_t serial_;  // tells this tokenizer's per-thread piece cache from others'
};

// "gpt2" (the bundled copy), a tokenizer.json file, or a directory with tokenizer.json or
// encoder.json + vocab.bpe. Errors name the path and what is wrong.
std::unique_ptr<BpeTokenizer> load_bpe_tokenizer(const std::string& spec);

}  // namespace dew::data
