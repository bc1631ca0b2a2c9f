#pragma once
// A checkpoint's tokenizer as a whole: the Tokenizer plus what tokenizer_config.json and
// generation_config.json say about using it (BOS/EOS/pad tokens, whether encoding starts with BOS, the
// end-of-turn ids generation stops at, the chat template).
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/data/chat_templates/chat_template.h"
#include "dew/data/tokenizers/tokenizer.h"

namespace dew::data {

struct PretrainedTokenizer {
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<TokenId> bos_id, eos_id, pad_id;
  bool add_bos = false;  // encode() starts with bos_id (tokenizer_config.json add_bos_token)
  std::string bos_token, eos_token, pad_token, unk_token;  // their text ("" when unset)
  // eos plus other end-of-turn ids (generation_config.json eos_token_id lists), without repeats.
  std::vector<TokenId> stop_ids;
  std::optional<ChatTemplate> chat_template;
  std::optional<long long> model_max_length;

  // Text to ids, special tokens written in the text recognised (as transformers does), BOS first when
  // add_bos.
  std::vector<TokenId> encode(std::string_view text) const;
  // The chat template over `messages` with the set ones of bos_token/eos_token/pad_token/unk_token supplied
  // (as transformers passes its special_tokens_map); an error if there is no chat template. `extra` adds template variables (tools, enable_thinking, ...).
  std::string render_chat(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                          const nlohmann::ordered_json& extra = {}) const;
};

// Reads dir/tokenizer.json (load_tokenizer), dir/tokenizer_config.json (bos/eos/pad/unk_token as a string
// or {"content": ...}, add_bos_token (absent: whether tokenizer.json's post_processor starts with BOS), chat_template as a string or a list of {name, template}
// of which "default" is used, added_tokens_decoder, model_max_length) and dir/generation_config.json when
// present (eos_token_id: an int or a list, all of them stop ids). Errors name the file and the field.
PretrainedTokenizer load_pretrained_tokenizer(const std::filesystem::path& dir);

// Writes tokenizer.json and tokenizer_config.json (chat_template, bos/eos/pad tokens, add_bos_token,
// model_max_length when known) atomically, so both load_pretrained_tokenizer and transformers'
// AutoTokenizer load it back; also generation_config.json's eos_token_id when stop_ids has more than eos.
void save_pretrained_tokenizer(const PretrainedTokenizer& tokenizer, const std::filesystem::path& dir);

}  // namespace dew::data
