#include "dew/data/chat/chat_records.h"

#include "dew/core/error.h"
#include "dew/data/chat/chat_role.h"
#include "dew/data/chat/jsonl_lines.h"

namespace dew::data {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

const char* const kRoles = "system, user, assistant or tool";

const Json& required(const Json& object, const char* key, const fs::path& file, std::int64_t line, const char* needs) {
  auto it = object.find(key);
  if (it == object.end()) dew::fail(jsonl_field_context(file, line, key), "is missing; ", needs);
  return *it;
}

// A prompt, chosen or rejected value: a string, or a checked message list.
void check_text_or_messages(const Json& value, const fs::path& file, std::int64_t line, const std::string& field) {
  if (value.is_string()) return;
  if (value.is_array()) return check_messages(value, file, line, field);
  dew::fail(jsonl_field_context(file, line, field), "is ", jsonl_shown(value),
            "; expected a string or a list of messages [{\"role\": ..., \"content\": ...}]");
}

}  // namespace

void check_messages(const Json& messages, const fs::path& file, std::int64_t line, const std::string& field) {
  if (!messages.is_array()) {
    dew::fail(jsonl_field_context(file, line, field), "is ", jsonl_shown(messages),
              "; expected a list of messages [{\"role\": ..., \"content\": ...}]");
  }
  if (messages.empty()) dew::fail(jsonl_field_context(file, line, field), "is an empty list; it needs at least one message");
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const std::string name = dew::str(field, "[", i, "]");
    if (!m.is_object()) {
      dew::fail(jsonl_field_context(file, line, name), "is ", jsonl_shown(m), "; expected an object {\"role\": ..., \"content\": ...}");
    }
    auto role = m.find("role");
    if (role == m.end()) dew::fail(jsonl_field_context(file, line, name + ".role"), "is missing; expected ", kRoles);
    if (!role->is_string() || !message_role(role->get<std::string>())) {
      dew::fail(jsonl_field_context(file, line, name + ".role"), "is ", jsonl_shown(*role), "; expected ", kRoles);
    }
    auto content = m.find("content");
    const bool calls_tools = role->get<std::string>() == "assistant" && m.contains("tool_calls");
    if (content == m.end() || content->is_null()) {
      if (calls_tools) continue;
      dew::fail(jsonl_field_context(file, line, name + ".content"), content == m.end() ? "is missing" : "is null",
                "; expected a string (only an assistant message with tool_calls may leave it out)");
    }
    if (!content->is_string()) {
      dew::fail(jsonl_field_context(file, line, name + ".content"), "is ", jsonl_shown(*content), "; expected a string");
    }
  }
}

std::vector<ChatConversation> read_chat_jsonl(const fs::path& file) {
  std::vector<ChatConversation> out;
  read_jsonl_lines(file, "conversations", [&](const Json& object, std::int64_t line) {
    const Json& messages = required(object, "messages", file, line,
                                    "each line needs {\"messages\": [{\"role\": ..., \"content\": ...}, ...]}");
    check_messages(messages, file, line, "messages");
    out.push_back({messages, line});
  });
  return out;
}

std::vector<PreferencePair> read_preference_jsonl(const fs::path& file) {
  std::vector<PreferencePair> out;
  const char* needs = "a preference pair needs prompt, chosen and rejected (three strings, or three message lists)";
  read_jsonl_lines(file, "preference pairs", [&](const Json& object, std::int64_t line) {
    PreferencePair pair{required(object, "prompt", file, line, needs), required(object, "chosen", file, line, needs),
                        required(object, "rejected", file, line, needs), line};
    check_text_or_messages(pair.prompt, file, line, "prompt");
    // TRL tells the formats apart by the prompt; the completions must then be of the same kind.
    for (const auto& [name, value] : {std::pair<const char*, const Json*>{"chosen", &pair.chosen}, {"rejected", &pair.rejected}}) {
      if (pair.conversational()) {
        check_messages(*value, file, line, name);
      } else if (!value->is_string()) {
        dew::fail(jsonl_field_context(file, line, name), "is ", jsonl_shown(*value),
                  "; expected a string, since 'prompt' is one (or make all three message lists)");
      }
    }
    out.push_back(std::move(pair));
  });
  return out;
}

std::vector<PromptRecord> read_prompt_jsonl(const fs::path& file) {
  std::vector<PromptRecord> out;
  read_jsonl_lines(file, "prompts", [&](const Json& object, std::int64_t line) {
    PromptRecord record;
    record.line = line;
    record.prompt = required(object, "prompt", file, line, "each line needs {\"prompt\": a string or a message list}");
    check_text_or_messages(record.prompt, file, line, "prompt");
    if (auto truth = object.find("ground_truth"); truth != object.end() && !truth->is_null()) {
      if (truth->is_string()) {
        record.ground_truth = truth->get<std::string>();
      } else if (truth->is_number()) {
        record.ground_truth = truth->dump();
      } else {
        dew::fail(jsonl_field_context(file, line, "ground_truth"), "is ", jsonl_shown(*truth), "; expected a string or a number");
      }
    }
    if (auto source = object.find("data_source"); source != object.end()) record.data_source = *source;
    if (auto extra = object.find("extra_info"); extra != object.end()) record.extra_info = *extra;
    out.push_back(std::move(record));
  });
  return out;
}

}  // namespace dew::data
