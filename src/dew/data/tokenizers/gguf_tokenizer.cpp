#include "dew/data/tokenizers/gguf_tokenizer.h"

#include <algorithm>

#include "dew/core/error.h"
#include "dew/data/tokenizers/byte_level.h"

namespace dew::data {
namespace {

// llama.cpp's token types (llama_token_type / SentencePiece's): what each id is for.
constexpr std::int64_t kControlToken = 3;
constexpr std::int64_t kUserDefinedToken = 4;

void check_id(const std::optional<TokenId>& id, const char* key, std::size_t vocab, const std::string& file) {
  if (id && (*id < 0 || static_cast<std::size_t>(*id) >= vocab))
    fail(file, ": metadata '", key, "' is ", *id, ", outside the vocabulary (tokenizer.ggml.tokens has ", vocab,
         " tokens)");
}

// A token's text as it appears in raw text: its bytes when it is written in the byte-level alphabet (all
// real tokens are), else its UTF-8 as stored (control tokens like "<｜begin▁of▁sentence｜>").
std::string added_content(const std::string& token) {
  if (auto raw = from_byte_level(token)) return *raw;
  return token;
}

}  // namespace

std::unique_ptr<BpeTokenizer> gguf_bpe_tokenizer(const GgufTokenizerMetadata& metadata, const std::string& file) {
  if (metadata.model != "gpt2")
    fail(file, ": metadata 'tokenizer.ggml.model' is \"", metadata.model, "\"; the byte-level BPE reader takes only "
         "\"gpt2\" vocabularies (gguf_pretrained_tokenizer also reads llama, t5, bert and gemma4 ones)");
  GgufPreTokenizer pre = gguf_pre_tokenizer(metadata.pre, file);
  const std::size_t vocab = metadata.tokens.size();
  if (vocab == 0) fail(file, ": metadata 'tokenizer.ggml.tokens' is empty");
  if (!metadata.token_types.empty() && metadata.token_types.size() != vocab)
    fail(file, ": metadata 'tokenizer.ggml.token_type' has ", metadata.token_types.size(), " entries but "
         "tokenizer.ggml.tokens has ", vocab, "; they must be the same length");
  check_id(metadata.bos_id, "tokenizer.ggml.bos_token_id", vocab, file);
  check_id(metadata.eos_id, "tokenizer.ggml.eos_token_id", vocab, file);
  check_id(metadata.unknown_id, "tokenizer.ggml.unknown_token_id", vocab, file);
  check_id(metadata.pad_id, "tokenizer.ggml.padding_token_id", vocab, file);
  check_id(metadata.eot_id, "tokenizer.ggml.eot_token_id", vocab, file);
  check_id(metadata.eom_id, "tokenizer.ggml.eom_token_id", vocab, file);

  BpeDefinition definition;
  definition.vocab = metadata.tokens;
  definition.split_patterns = pre.split_patterns;
  definition.ignore_merges = pre.ignore_merges;
  definition.eos_id = metadata.eos_id;
  definition.merges.reserve(metadata.merges.size());
  for (std::size_t rank = 0; rank < metadata.merges.size(); ++rank) {
    const std::string& line = metadata.merges[rank];
    std::size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos)
      fail(file, ": metadata 'tokenizer.ggml.merges[", rank, "]' is '", line,
           "'; a merge is two tokens separated by one space");
    definition.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  for (std::size_t id = 0; id < metadata.token_types.size(); ++id) {
    std::int64_t type = metadata.token_types[id];
    if (type != kControlToken && type != kUserDefinedToken) continue;
    if (metadata.tokens[id].empty()) fail(file, ": metadata 'tokenizer.ggml.tokens[", id, "]' is empty");
    definition.added_tokens.push_back(
        AddedToken{added_content(metadata.tokens[id]), static_cast<TokenId>(id), type == kControlToken});
  }
  return std::make_unique<BpeTokenizer>(std::move(definition), file);
}

PretrainedTokenizer gguf_pretrained_tokenizer(const GgufTokenizerMetadata& metadata, const std::string& file) {
  PretrainedTokenizer out;
  bool byte_level = metadata.model == "gpt2";
  out.tokenizer = byte_level ? gguf_bpe_tokenizer(metadata, file) : gguf_pipeline_tokenizer(metadata, file);
  auto text_of = [&](const std::optional<TokenId>& id) {
    if (!id) return std::string();
    const std::string& token = metadata.tokens.at(static_cast<std::size_t>(*id));
    return byte_level ? added_content(token) : token;
  };
  out.bos_id = metadata.bos_id;
  out.eos_id = metadata.eos_id;
  out.pad_id = metadata.pad_id;
  out.bos_token = text_of(metadata.bos_id);
  out.eos_token = text_of(metadata.eos_id);
  out.pad_token = text_of(metadata.pad_id);
  // llama.cpp's defaults when the file does not say: SentencePiece and gemma4 add BOS, BPE as its pre says.
  out.add_bos = metadata.add_bos.value_or(byte_level ? gguf_pre_tokenizer(metadata.pre, file).add_bos_default
                                                     : metadata.model == "llama" || metadata.model == "gemma4");
  if (out.add_bos && !out.bos_id)
    fail(file, ": metadata 'tokenizer.ggml.add_bos_token' is true but 'tokenizer.ggml.bos_token_id' is missing");
  for (const auto& id : {metadata.eos_id, metadata.eot_id, metadata.eom_id})
    if (id && std::find(out.stop_ids.begin(), out.stop_ids.end(), *id) == out.stop_ids.end())
      out.stop_ids.push_back(*id);
  if (metadata.chat_template && !metadata.chat_template->empty())
    out.chat_template.emplace(*metadata.chat_template, file + ": tokenizer.chat_template");
  out.model_max_length = metadata.context_length;
  return out;
}

}  // namespace dew::data
