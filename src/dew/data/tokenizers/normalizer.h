#pragma once
// tokenizer.json normalizers: text -> text before pre-tokenization. One class per Hugging Face type
// (normalizers.cpp), looked up by its "type" string in a table, so a new kind is a row.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/data/tokenizers/json_fields.h"

namespace dew::data {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string_view text) const = 0;
};
using NormalizerPtr = std::unique_ptr<const Normalizer>;

// One normalizer node (types: NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Nmt, Prepend, Replace,
// Precompiled, BertNormalizer, Sequence). Errors name fields.path, `where` and the value.
NormalizerPtr read_normalizer(const JsonFields& fields, const nlohmann::json& node, const std::string& where);

// The steps applied in order (a Sequence built in code).
NormalizerPtr make_normalizer_sequence(std::vector<NormalizerPtr> steps);

// SentencePiece's normalization rules (a Darts double-array trie and its strings; precompiled_charsmap.h).
NormalizerPtr make_precompiled_normalizer(std::string charsmap, const std::string& where);

}  // namespace dew::data
