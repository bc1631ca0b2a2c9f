#pragma once
// The body of POST /v1/chat/completions and POST /v1/completions, parsed and checked into one plain
// struct, without a model: the HTTP layer turns it into token ids and engine requests. Every wrong type or
// out-of-range value is an ApiError 400 naming the field and the value; fields the server does not know
// are ignored, as the OpenAI API ignores them. Fields it knows but cannot honour (tools, a JSON response
// format, logit_bias, ...) are refused by name rather than silently dropped.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace dew::serve {

enum class Endpoint { chat_completions, completions };

// One prompt of /v1/completions: text, or token ids given directly (OpenAI accepts both).
struct PromptInput {
  std::string text;
  std::vector<std::int32_t> ids;
  bool is_ids = false;
};

struct CompletionRequest {
  Endpoint endpoint = Endpoint::chat_completions;
  std::string model;                        // "" when the client named none
  nlohmann::ordered_json messages;          // chat: [{role, content (a string)[, name]}], roles checked
  std::vector<PromptInput> prompts;         // completions: one or more
  double temperature = 1.0;                 // OpenAI's default; 0 = greedy
  double top_p = 1.0;
  std::int64_t top_k = 0;                   // extensions under vLLM's names: top_k, min_p,
  double min_p = 0.0;                       // repetition_penalty
  double repetition_penalty = 1.0;
  std::optional<std::int64_t> max_tokens;   // absent: up to the context
  std::vector<std::string> stop;            // stop strings, cut from the output
  std::int64_t n = 1;                       // choices per prompt
  std::optional<std::uint64_t> seed;        // absent: a fresh random seed per request
  bool logprobs = false;
  std::int64_t top_logprobs = 0;            // alternatives per token (chat 0..20, completions 0..5)
  double presence_penalty = 0.0, frequency_penalty = 0.0;
  bool stream = false;
  bool include_usage = false;               // stream_options.include_usage
  bool echo = false;                        // completions: the prompt's text before the completion
  bool ignore_eos = false;                  // vLLM's extension: run to max_tokens, end-of-turn ids as text
};

// What a request gets for a sampling field it leaves out: OpenAI's defaults, or what the served model's
// generation_config.json (or GGUF metadata) recommends (dew serve fills them in; cli/serve_command.cpp).
struct RequestDefaults {
  double temperature = 1.0;
  double top_p = 1.0;
  std::int64_t top_k = 0;
  double min_p = 0.0;
  double repetition_penalty = 1.0;
  std::optional<std::int64_t> max_tokens;  // absent: up to the context
};

struct RequestLimits {
  std::int64_t max_n = 16;          // choices per request
  std::size_t max_stop = 16;        // stop strings per request
  std::size_t max_prompts = 64;     // prompts per /v1/completions request
};

// JSON text -> object; invalid JSON or a non-object is an ApiError 400 saying where parsing stopped.
nlohmann::json parse_json_body(std::string_view text);

CompletionRequest parse_chat_request(const nlohmann::json& body, const RequestLimits& limits = {},
                                     const RequestDefaults& defaults = {});
CompletionRequest parse_completion_request(const nlohmann::json& body, const RequestLimits& limits = {},
                                           const RequestDefaults& defaults = {});

}  // namespace dew::serve
