#pragma once
// A checkpoint's chat template (tokenizer_config.json "chat_template", GGUF tokenizer.chat_template),
// rendered exactly as transformers' apply_chat_template(tokenize=False) renders it: Jinja2 with
// trim_blocks and lstrip_blocks, the loopcontrols and {% generation %} extensions, and the globals
// transformers adds (raise_exception, strftime_now, namespace, dict) and its tojson filter.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace dew::data {

namespace jinja {
struct Template;
}

class ChatTemplate {
 public:
  // Parses `source` now; syntax errors throw dew::Error naming `name` (where the template came from) and
  // the line.
  ChatTemplate(std::string source, std::string name);

  // The template's text for `messages` (a list of {"role", "content", ...} objects). Like transformers,
  // the template sees messages, add_generation_prompt, tools and documents (none unless `extra` sets them)
  // and every key of `extra` (bos_token, eos_token, enable_thinking, ...). Messages carrying
  // reasoning_content/thinking/reasoning get the other names too, as transformers aliases them.
  // raise_exception() in the template and runtime errors throw dew::Error naming the template and line.
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra = {}) const;

  const std::string& source() const { return source_; }
  const std::string& name() const { return name_; }

 private:
  std::string source_, name_;
  std::shared_ptr<const jinja::Template> compiled_;
};

}  // namespace dew::data
