#pragma once
// Which part of a conversation a token came from. SFT trains on targets whose role is `assistant`
// (LMObjective's lm.loss_role over the batch tensor "text_roles"); the numbers are stored in chat token
// directories' *.roles files, so they never change.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dew::data {

enum class ChatRole : std::uint8_t {
  system = 0,
  user = 1,
  assistant = 2,
  tool = 3,
  // Text the chat template adds that belongs to no message: a leading BOS, a default system prompt's
  // wrapping when it has no message, the assistant header that add_generation_prompt renders. Padding in
  // packed rows carries it too.
  template_text = 4,
};

inline constexpr std::uint8_t chat_role_count = 5;

// "system", "user", "assistant", "tool", "template_text".
const char* chat_role_name(ChatRole role);
// The role a message's "role" field names (system, user, assistant, tool); nullopt for anything else,
// template_text included (no message has it).
std::optional<ChatRole> message_role(std::string_view name);

}  // namespace dew::data
