#include "dew/data/chat_templates/chat_template.h"

#include "dew/core/error.h"
#include "dew/data/chat_templates/jinja/interpreter.h"
#include "dew/data/chat_templates/jinja/parser.h"

namespace dew::data {
namespace {

constexpr const char* kReasoningFields[] = {"reasoning_content", "thinking", "reasoning"};

// transformers' _alias_reasoning_fields: {"thinking": r, **message, "reasoning_content": r}.
jinja::Value alias_reasoning(const nlohmann::ordered_json& message) {
  jinja::Value value = jinja::from_json(message);
  if (!message.is_object()) return value;
  const nlohmann::ordered_json* reasoning = nullptr;
  for (const char* key : kReasoningFields) {
    auto it = message.find(key);
    if (it != message.end() && !it->is_null()) {
      reasoning = &*it;
      break;
    }
  }
  if (!reasoning) return value;
  jinja::Value r = jinja::from_json(*reasoning);
  auto dict = std::make_shared<jinja::Dict>();
  dict->set("thinking", r);
  for (auto& [key, item] : value.dict().items) dict->set(key, item);
  dict->set("reasoning_content", r);
  return jinja::Value(dict);
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source, std::string name)
    : source_(std::move(source)), name_(std::move(name)), compiled_(jinja::parse_template(source_, name_)) {}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra) const {
  if (!messages.is_array()) fail(name_, ": the messages must be a JSON list, not ", messages.type_name());
  if (!extra.is_null() && !extra.is_object()) fail(name_, ": the extra template variables must be a JSON object");
  auto context = std::make_shared<jinja::Dict>();
  jinja::List chat;
  for (const auto& message : messages) {
    if (!message.is_object()) fail(name_, ": chat messages must be objects, got ", message.dump());
    chat.push_back(alias_reasoning(message));
  }
  context->set("messages", jinja::Value(std::move(chat)));
  context->set("tools", jinja::Value::none());
  context->set("documents", jinja::Value::none());
  context->set("add_generation_prompt", jinja::Value(add_generation_prompt));
  if (extra.is_object())
    for (auto it = extra.begin(); it != extra.end(); ++it) context->set(it.key(), jinja::from_json(it.value()));
  jinja::Interpreter interpreter(*compiled_);
  return interpreter.render(context);
}

}  // namespace dew::data
