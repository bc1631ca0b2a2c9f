#pragma once
// tokenizer.json post-processors: the ids of one encoded text -> those ids with the special tokens the
// checkpoint expects around them (Llama's <s>, BERT's [CLS] ... [SEP], T5's </s>). Types TemplateProcessing,
// BertProcessing, RobertaProcessing, ByteLevel (ids unchanged) and Sequence, read through a table.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/data/tokenizers/json_fields.h"
#include "dew/data/tokenizers/tokenizer.h"

namespace dew::data {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual std::vector<TokenId> process(std::vector<TokenId> ids) const = 0;
};
using PostProcessorPtr = std::unique_ptr<const PostProcessor>;

PostProcessorPtr read_post_processor(const JsonFields& fields, const nlohmann::json& node, const std::string& where);

// BOS first and/or EOS last (GGUF's add_bos_token / add_eos_token).
PostProcessorPtr make_bos_eos_processor(std::optional<TokenId> bos, std::optional<TokenId> eos);

}  // namespace dew::data
