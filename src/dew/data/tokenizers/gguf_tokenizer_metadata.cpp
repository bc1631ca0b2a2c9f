// tokenizer.* metadata of a GGUF file -> GgufTokenizerMetadata.
#include "dew/core/error.h"
#include "dew/data/tokenizers/gguf_tokenizer.h"
#include "dew/formats/gguf_file.h"

namespace dew::data {
namespace {

std::optional<TokenId> optional_id(const formats::GgufFile& file, const std::string& key) {
  const formats::GgufValue* value = file.find(key);
  if (!value) return std::nullopt;
  std::int64_t id = value->as_int();
  if (id < 0 || id > INT32_MAX) fail(file.name(), ": metadata '", key, "' is ", id, ", not a token id");
  return static_cast<TokenId>(id);
}

std::optional<bool> optional_flag(const formats::GgufFile& file, const std::string& key) {
  const formats::GgufValue* value = file.find(key);
  return value ? std::optional<bool>(value->as_bool()) : std::nullopt;
}

}  // namespace

GgufTokenizerMetadata gguf_tokenizer_metadata(const formats::GgufFile& file) {
  GgufTokenizerMetadata m;
  m.model = file.at("tokenizer.ggml.model").as_string();
  if (const auto* pre = file.find("tokenizer.ggml.pre")) m.pre = pre->as_string();
  m.tokens = file.at("tokenizer.ggml.tokens").as_strings();
  if (const auto* types = file.find("tokenizer.ggml.token_type")) m.token_types = types->as_ints();
  if (const auto* merges = file.find("tokenizer.ggml.merges")) m.merges = merges->as_strings();
  if (const auto* scores = file.find("tokenizer.ggml.scores"))
    for (double score : scores->as_floats()) m.scores.push_back(static_cast<float>(score));
  if (const auto* charsmap = file.find("tokenizer.ggml.precompiled_charsmap"))
    for (std::int64_t byte : charsmap->as_ints()) m.precompiled_charsmap += static_cast<char>(byte);
  m.bos_id = optional_id(file, "tokenizer.ggml.bos_token_id");
  m.eos_id = optional_id(file, "tokenizer.ggml.eos_token_id");
  m.unknown_id = optional_id(file, "tokenizer.ggml.unknown_token_id");
  m.pad_id = optional_id(file, "tokenizer.ggml.padding_token_id");
  m.eot_id = optional_id(file, "tokenizer.ggml.eot_token_id");
  m.eom_id = optional_id(file, "tokenizer.ggml.eom_token_id");
  m.add_bos = optional_flag(file, "tokenizer.ggml.add_bos_token");
  m.add_eos = optional_flag(file, "tokenizer.ggml.add_eos_token");
  m.add_space_prefix = optional_flag(file, "tokenizer.ggml.add_space_prefix");
  m.remove_extra_whitespaces = optional_flag(file, "tokenizer.ggml.remove_extra_whitespaces");
  if (const auto* chat = file.find("tokenizer.chat_template")) m.chat_template = chat->as_string();
  if (const auto* arch = file.find("general.architecture"))
    if (const auto* context = file.find(arch->as_string() + ".context_length")) m.context_length = context->as_int();
  return m;
}

}  // namespace dew::data
