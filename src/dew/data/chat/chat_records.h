#pragma once
// The three kinds of post-training JSONL records, read and checked whole before anything is written:
//
//   chat (SFT)   {"messages": [{"role": "system"|"user"|"assistant"|"tool", "content": "..."}, ...]}
//                (chat datasets and OpenAI fine-tuning files; other keys of a message, such as tool_calls
//                or name, are kept and passed to the chat template)
//   preference   {"prompt": P, "chosen": C, "rejected": R}: TRL's formats. Standard: three strings.
//   (DPO)        Conversational: P a message list, C and R message lists of the completion (usually one
//                assistant message each).
//   prompt       {"prompt": P, "ground_truth": "...", "data_source": ..., "extra_info": ...}: P a string or
//   (GRPO)       a message list; the other fields optional and handed to the reward as they are.
//
// Every error names the file, the 1-based line and the field, e.g.
//   data.jsonl:7: field 'messages[2].role' is "bot"; expected system, user, assistant or tool
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dew::data {

struct ChatConversation {
  nlohmann::ordered_json messages;  // a non-empty list of checked messages
  std::int64_t line = 0;            // where it was in the file (1-based)
};

struct PreferencePair {
  nlohmann::ordered_json prompt, chosen, rejected;  // three strings, or three message lists
  std::int64_t line = 0;

  bool conversational() const { return prompt.is_array(); }
};

struct PromptRecord {
  nlohmann::ordered_json prompt;   // a string or a message list
  std::string ground_truth;        // "" when absent; a number in the file is kept as its JSON text ("42")
  nlohmann::ordered_json data_source, extra_info;  // null when absent
  std::int64_t line = 0;
};

std::vector<ChatConversation> read_chat_jsonl(const std::filesystem::path& file);
std::vector<PreferencePair> read_preference_jsonl(const std::filesystem::path& file);
std::vector<PromptRecord> read_prompt_jsonl(const std::filesystem::path& file);

// Checks a message list as the readers do; `field` names it in errors ("messages", "chosen"). A message
// is an object with a role among system, user, assistant and tool, and a string content; an assistant
// message that carries tool_calls may leave content out or null.
void check_messages(const nlohmann::ordered_json& messages, const std::filesystem::path& file, std::int64_t line,
                    const std::string& field);

}  // namespace dew::data
