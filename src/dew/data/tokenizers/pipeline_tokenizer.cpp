#include "dew/data/tokenizers/pipeline_tokenizer.h"

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/core/printable.h"

namespace dew::data {

PipelineTokenizer::PipelineTokenizer(TokenizerPipeline pipeline, std::string name)
    : pipeline_(std::move(pipeline)), name_(std::move(name)) {
  if (!pipeline_.model) fail(name_, ": the tokenizer has no model");
  const Vocabulary& vocab = pipeline_.model->vocabulary();
  vocab_size_ = static_cast<std::int64_t>(vocab.tokens.size());
  for (const AddedTokenSpec& token : pipeline_.added_tokens) {
    auto id = static_cast<std::size_t>(token.id);
    if (id < vocab.tokens.size() && !vocab.tokens[id].empty() && vocab.tokens[id] != token.content)
      fail(name_, ": added token '", printable(token.content), "' has id ", token.id, ", which is '",
           printable(vocab.tokens[id]), "' in the model's vocabulary");
    vocab_size_ = std::max<std::int64_t>(vocab_size_, token.id + 1);
  }
  added_ = AddedVocabulary(pipeline_.added_tokens, pipeline_.normalizer.get());
  eos_id_ = pipeline_.eos_id;
  if (!eos_id_)
    for (std::string_view candidate : {"</s>", "<|endoftext|>", "<|end_of_text|>", "<|im_end|>"})
      if ((eos_id_ = token_to_id(candidate))) break;
}

std::optional<TokenId> PipelineTokenizer::token_to_id(std::string_view token) const {
  for (const AddedTokenSpec& added : added_.tokens())
    if (added.content == token) return added.id;
  return pipeline_.model->vocabulary().find(token);
}

void PipelineTokenizer::encode_stretch(std::string_view text, bool at_text_start, bool allow_special,
                                       std::vector<TokenId>& out) const {
  std::string normalized = pipeline_.normalizer ? pipeline_.normalizer->normalize(text) : std::string(text);
  for (const TextSegment& segment : added_.split(normalized, /*normalized=*/true, allow_special)) {
    if (segment.id) {
      out.push_back(*segment.id);
      continue;
    }
    std::vector<PrePiece> pieces{PrePiece{normalized.substr(segment.start, segment.end - segment.start),
                                          at_text_start && segment.start == 0}};
    if (pieces[0].text.empty()) continue;
    if (pipeline_.pre_tokenizer) pieces = pipeline_.pre_tokenizer->apply(std::move(pieces));
    for (const PrePiece& piece : pieces) pipeline_.model->tokenize(piece.text, out);
  }
}

std::vector<TokenId> PipelineTokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<TokenId> out;
  for (const TextSegment& segment : added_.split(text, /*normalized=*/false, allow_special)) {
    if (segment.id) out.push_back(*segment.id);
    else if (segment.end > segment.start)
      encode_stretch(text.substr(segment.start, segment.end - segment.start), segment.start == 0, allow_special, out);
  }
  return out;
}

std::vector<TokenId> PipelineTokenizer::add_special_tokens(std::vector<TokenId> ids) const {
  return pipeline_.post_processor ? pipeline_.post_processor->process(std::move(ids)) : ids;
}

std::string PipelineTokenizer::decode(std::span<const TokenId> ids) const {
  const Vocabulary& vocab = pipeline_.model->vocabulary();
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    TokenId id = ids[i];
    if (const AddedTokenSpec* added = added_.find_id(id)) {
      tokens.push_back(added->content);
    } else if (id >= 0 && static_cast<std::size_t>(id) < vocab.tokens.size() && !vocab.tokens[static_cast<std::size_t>(id)].empty()) {
      tokens.push_back(vocab.tokens[static_cast<std::size_t>(id)]);
    } else {
      fail(name_, ": token id ", id, " at position ", i, " is not in the vocabulary (ids 0-", vocab_size_ - 1, ")");
    }
  }
  if (pipeline_.decoder) tokens = pipeline_.decoder->decode_chain(std::move(tokens));
  std::string out;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (!pipeline_.decoder && i > 0) out += ' ';
    out += tokens[i];
  }
  return out;
}

std::string PipelineTokenizer::save(const std::filesystem::path& dir) const {
  if (pipeline_.json_text.empty())
    fail(name_, ": this tokenizer was built from GGUF metadata and has no tokenizer.json to save");
  std::filesystem::create_directories(dir);
  write_file_atomic(dir / "tokenizer.json", pipeline_.json_text);
  nlohmann::ordered_json config = {{"tokenizer_class", "PreTrainedTokenizerFast"}};
  if (eos_id_) {
    const AddedTokenSpec* added = added_.find_id(*eos_id_);
    config["eos_token"] = added ? added->content : pipeline_.model->vocabulary().tokens.at(static_cast<std::size_t>(*eos_id_));
  }
  write_file_atomic(dir / "tokenizer_config.json", config.dump(2) + "\n");
  return "tokenizer.json";
}

}  // namespace dew::data
