#include "dew/data/chat/chat_role.h"

namespace dew::data {

const char* chat_role_name(ChatRole role) {
  switch (role) {
    case ChatRole::system: return "system";
    case ChatRole::user: return "user";
    case ChatRole::assistant: return "assistant";
    case ChatRole::tool: return "tool";
    case ChatRole::template_text: return "template_text";
  }
  return "unknown";
}

std::optional<ChatRole> message_role(std::string_view name) {
  if (name == "system") return ChatRole::system;
  if (name == "user") return ChatRole::user;
  if (name == "assistant") return ChatRole::assistant;
  if (name == "tool") return ChatRole::tool;
  return std::nullopt;
}

}  // namespace dew::data
