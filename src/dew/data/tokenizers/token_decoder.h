#pragma once
// tokenizer.json decoders: the token texts of some ids -> the texts whose concatenation is the decoded text
// (Hugging Face's decode_chain). One class per type (token_decoders.cpp), read through a table.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/data/tokenizers/json_fields.h"

namespace dew::data {

class TokenDecoder {
 public:
  virtual ~TokenDecoder() = default;
  virtual std::vector<std::string> decode_chain(std::vector<std::string> tokens) const = 0;
};
using TokenDecoderPtr = std::unique_ptr<const TokenDecoder>;

// Types: ByteFallback, Fuse, Strip, Metaspace, Replace, ByteLevel, WordPiece, BPEDecoder, Sequence.
TokenDecoderPtr read_token_decoder(const JsonFields& fields, const nlohmann::json& node, const std::string& where);

// What SentencePiece vocabularies decode with (llama.cpp "llama" and "t5"): ▁ -> ' ', <0xXX> -> bytes, and the
// first leading space dropped when `strip_first_space`.
TokenDecoderPtr make_sentencepiece_decoder(bool strip_first_space);

}  // namespace dew::data
