#pragma once
// tokenizer.json pre-tokenizers: each splits (and may rewrite) the pieces the model then tokenizes one by one.
// One class per Hugging Face type (pre_tokenizer_steps.cpp), read through a table keyed by "type".
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/data/tokenizers/json_fields.h"
#include "dew/data/tokenizers/split_behavior.h"

namespace dew::data {

class PreTokenizerStep {
 public:
  virtual ~PreTokenizerStep() = default;
  // pieces -> the pieces after this step, in order.
  virtual std::vector<PrePiece> apply(std::vector<PrePiece> pieces) const = 0;
};
using PreTokenizerStepPtr = std::unique_ptr<const PreTokenizerStep>;

// Types: Metaspace, ByteLevel, Split, Digits, Punctuation, Whitespace, WhitespaceSplit, BertPreTokenizer,
// CharDelimiterSplit, Sequence. Errors name fields.path, `where` and the value.
PreTokenizerStepPtr read_pre_tokenizer_step(const JsonFields& fields, const nlohmann::json& node,
                                            const std::string& where);

// Metaspace as SentencePiece vocabularies use it: ' ' -> `replacement`, `replacement` prepended
// (prepend_scheme "always", "first" or "never"), split before each replacement when `split`.
PreTokenizerStepPtr make_metaspace(std::string replacement, std::string prepend_scheme, bool split);

}  // namespace dew::data
