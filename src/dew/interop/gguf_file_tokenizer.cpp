// tokenizer.* metadata of a GGUF file -> data::GgufTokenizerMetadata -> PretrainedTokenizer.
#include "dew/core/error.h"
#include "dew/data/tokenizers/gguf_tokenizer.h"
#include "dew/interop/gguf_model.h"

namespace dew::interop {
namespace {

std::optional<data::TokenId> optional_id(const formats::GgufFile& file, const std::string& key) {
  const formats::GgufValue* value = file.find(key);
  if (!value) return std::nullopt;
  std::int64_t id = value->as_int();
  if (id < 0 || id > INT32_MAX) dew::fail(file.name(), ": metadata '", key, "' is ", id, ", not a token id");
  return static_cast<data::TokenId>(id);
}

}  // namespace

data::PretrainedTokenizer gguf_file_tokenizer(const formats::GgufFile& file) {
  data::GgufTokenizerMetadata m;
  m.model = file.at("tokenizer.ggml.model").as_string();
  if (const auto* pre = file.find("tokenizer.ggml.pre")) m.pre = pre->as_string();
  m.tokens = file.at("tokenizer.ggml.tokens").as_strings();
  if (const auto* types = file.find("tokenizer.ggml.token_type")) m.token_types = types->as_ints();
  if (m.model == "gpt2") m.merges = file.at("tokenizer.ggml.merges").as_strings();
  m.bos_id = optional_id(file, "tokenizer.ggml.bos_token_id");
  m.eos_id = optional_id(file, "tokenizer.ggml.eos_token_id");
  m.unknown_id = optional_id(file, "tokenizer.ggml.unknown_token_id");
  m.pad_id = optional_id(file, "tokenizer.ggml.padding_token_id");
  m.eot_id = optional_id(file, "tokenizer.ggml.eot_token_id");
  m.eom_id = optional_id(file, "tokenizer.ggml.eom_token_id");
  if (const auto* add_bos = file.find("tokenizer.ggml.add_bos_token")) m.add_bos = add_bos->as_bool();
  if (const auto* chat = file.find("tokenizer.chat_template")) m.chat_template = chat->as_string();
  if (const auto* arch = file.find("general.architecture"))
    if (const auto* context = file.find(arch->as_string() + ".context_length")) m.context_length = context->as_int();
  return data::gguf_pretrained_tokenizer(m, file.name());
}

}  // namespace dew::interop
