// Parses and renders arbitrary template text over a fixed small chat context. Bad templates may only
// raise dew::Error; nothing may crash, hang or grow without bound (the interpreter's limits, made small
// here, must stop runaway loops, recursion and output). Seeds: fuzz/seeds/jinja/ (real chat templates).
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "dew/core/error.h"
#include "dew/data/chat_templates/jinja/interpreter.h"
#include "dew/data/chat_templates/jinja/parser.h"

namespace {

const std::shared_ptr<dew::data::jinja::Dict>& context() {
  static const auto value = dew::data::jinja::from_json(nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi \u00e9 {{ x }}"},
      {"role": "assistant", "content": "Hello.", "reasoning_content": "think",
       "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1, "b": [true, null, 2.5]}}}]},
      {"role": "tool", "content": "{\"ok\": 1}"}
    ],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "n": 3, "f": 0.5, "s": "text"
  })"));
  static const auto dict = value.dict_ptr();
  return dict;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  dew::data::jinja::RenderLimits limits;
  limits.max_output_bytes = 1 << 16;
  limits.max_loop_iterations = 10'000;
  limits.max_call_depth = 16;
  try {
    auto tmpl = dew::data::jinja::parse_template(text, "fuzz.jinja");
    std::string out = dew::data::jinja::Interpreter(*tmpl, limits).render(context());
    if (out.size() > limits.max_output_bytes) std::abort();
  } catch (const dew::Error&) {
    // Refused with a message: what bad templates get.
  }
  return 0;
}
