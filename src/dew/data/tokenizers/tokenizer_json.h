#pragma once
// Reading and writing Hugging Face tokenizer.json (model type BPE with a ByteLevel pre-tokenizer and
// decoder) and GPT-2's encoder.json + vocab.bpe. Anything this reader cannot reproduce exactly (a
// normalizer, add_prefix_space, dropout, added tokens with lstrip/rstrip/single_word, other pre-tokenizers)
// is refused with an error that names the file and the field, rather than encoded differently.
#include <optional>
#include <string>
#include <string_view>

#include "dew/data/tokenizers/bpe_tokenizer.h"

namespace dew::data {

// tokenizer.json text -> definition; `path` names the file in errors. eos_id is left unset.
BpeDefinition parse_tokenizer_json(std::string_view json_text, const std::string& path);

// tokenizer_config.json text -> its eos_token (a string or {"content": ...}), if it has one.
std::optional<std::string> parse_eos_token(std::string_view json_text, const std::string& path);

// GPT-2's files: encoder.json (token -> id) and vocab.bpe ("#version" line, then one merge "a b" per line).
// <|endoftext|>, if present, becomes a special added token.
BpeDefinition parse_gpt2_files(std::string_view encoder_json, std::string_view vocab_bpe, const std::string& dir);

// The id of `token` (an added token's content or a vocabulary token's text), or an error naming `where`.
TokenId resolve_token(const BpeDefinition& definition, const std::string& token, const std::string& where);

std::string write_tokenizer_json(const BpeDefinition& definition);
std::string write_tokenizer_config_json(const BpeDefinition& definition, std::optional<TokenId> eos_id);

}  // namespace dew::data
