#include "dew/serve/openai_request.h"

#include <limits>

#include "dew/core/error.h"
#include "dew/serve/api_error.h"
#include "dew/serve/request_fields.h"

namespace dew::serve {

nlohmann::json parse_json_body(std::string_view text) {
  nlohmann::json body;
  try {
    body = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() says "[json.exception.parse_error.101] parse error at line 1, column 9: ..." ; the prefix
    // is noise to a client.
    std::string why = e.what();
    if (auto at = why.find("] "); at != std::string::npos) why = why.substr(at + 2);
    throw ApiError(400, str("the request body is not valid JSON (", why, "); send one JSON object"), "", "invalid_json");
  }
  if (!body.is_object()) {
    throw ApiError(400, str("the request body must be a JSON object, got ", describe_type(body)), "", "invalid_json");
  }
  return body;
}

namespace {

[[noreturn]] void unsupported(const std::string& param, const std::string& what) {
  invalid_field(param, str("'", param, "' ", what, " is not supported by dew serve; leave it out"), "unsupported_parameter");
}

// seed: any integer OpenAI accepts (int64, negatives included) or a uint64; the bits are the seed.
std::optional<std::uint64_t> read_seed(const nlohmann::json& body) {
  const auto* field = find_field(body, "seed");
  if (!field) return std::nullopt;
  if (field->is_number_unsigned()) return field->get<std::uint64_t>();
  if (field->is_number_integer()) return static_cast<std::uint64_t>(field->get<std::int64_t>());
  invalid_field("seed", str("'seed' must be an integer, got ", describe_type(*field), " (", describe_value(*field), ")"),
                "invalid_type");
}

std::vector<std::string> read_stop(const nlohmann::json& body, const RequestLimits& limits) {
  const auto* field = find_field(body, "stop");
  if (!field) return {};
  std::vector<std::string> stops;
  auto add = [&](const nlohmann::json& item, const std::string& where) {
    if (!item.is_string()) {
      invalid_field("stop", str("'", where, "' must be a string, got ", describe_type(item), " (", describe_value(item), ")"),
                    "invalid_type");
    }
    auto text = item.get<std::string>();
    if (text.empty()) invalid_field("stop", str("'", where, "' is an empty string; every stop string needs at least one character"));
    stops.push_back(std::move(text));
  };
  if (field->is_string()) {
    add(*field, "stop");
  } else if (field->is_array()) {
    if (field->size() > limits.max_stop) {
      invalid_field("stop", str("'stop' has ", field->size(), " strings; use at most ", limits.max_stop));
    }
    for (std::size_t i = 0; i < field->size(); ++i) add((*field)[i], str("stop[", i, "]"));
  } else {
    invalid_field("stop", str("'stop' must be a string or an array of strings, got ", describe_type(*field), " (",
                              describe_value(*field), ")"),
                  "invalid_type");
  }
  return stops;
}

// The fields both endpoints share.
void read_common(const nlohmann::json& body, const RequestLimits& limits, const RequestDefaults& defaults,
                 CompletionRequest& out) {
  out.model = read_string(body, "model").value_or("");
  out.temperature = read_number(body, "temperature", 0.0, 2.0).value_or(defaults.temperature);
  out.top_p = read_number(body, "top_p", 0.0, 1.0).value_or(defaults.top_p);
  if (out.top_p == 0.0) {
    // Keeping "the smallest set whose probability reaches 0" keeps the most likely token: greedy.
    out.top_p = 1.0;
    out.temperature = 0.0;
  }
  // vLLM's extensions; -1 is its spelling of "off" for top_k.
  auto top_k = read_integer(body, "top_k", -1, std::numeric_limits<std::int32_t>::max()).value_or(defaults.top_k);
  out.top_k = top_k < 0 ? 0 : top_k;
  out.min_p = read_number(body, "min_p", 0.0, 1.0).value_or(defaults.min_p);
  out.repetition_penalty = read_number(body, "repetition_penalty", 0.0, 100.0).value_or(defaults.repetition_penalty);
  if (out.repetition_penalty == 0.0) {
    invalid_field("repetition_penalty", "'repetition_penalty' is 0; use a positive number (1 = off)");
  }
  out.n = read_integer(body, "n", 1, limits.max_n).value_or(1);
  out.seed = read_seed(body);
  out.presence_penalty = read_number(body, "presence_penalty", -2.0, 2.0).value_or(0.0);
  out.frequency_penalty = read_number(body, "frequency_penalty", -2.0, 2.0).value_or(0.0);
  out.stop = read_stop(body, limits);
  out.stream = read_bool(body, "stream").value_or(false);
  out.ignore_eos = read_bool(body, "ignore_eos").value_or(false);
  if (const auto* options = find_field(body, "stream_options")) {
    if (!options->is_object()) {
      invalid_field("stream_options", str("'stream_options' must be an object like {\"include_usage\": true}, got ",
                                          describe_type(*options)),
                    "invalid_type");
    }
    if (!out.stream) invalid_field("stream_options", "'stream_options' is only allowed with \"stream\": true");
    out.include_usage = read_bool(*options, "include_usage").value_or(false);
  }
  if (const auto* bias = find_field(body, "logit_bias"); bias && !(bias->is_object() && bias->empty())) {
    unsupported("logit_bias", describe_value(*bias));
  }
}

// Chat content: a string, null (an assistant turn that only called tools) or a list of text parts.
std::string read_content(const nlohmann::json& message, const std::string& where) {
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) {
    invalid_field(where + ".content", str("'", where, ".content' must be a string or an array of text parts, got ",
                                          describe_type(*it)),
                  "invalid_type");
  }
  std::string text;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const auto& part = (*it)[i];
    std::string part_where = str(where, ".content[", i, "]");
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      invalid_field(part_where, str("'", part_where, "' must be an object like {\"type\": \"text\", \"text\": \"...\"}, got ",
                                    describe_value(part)),
                    "invalid_type");
    }
    if (part["type"] != "text") {
      invalid_field(part_where, str("'", part_where, ".type' is ", describe_value(part["type"]),
                                    "; dew serve takes text parts only (\"type\": \"text\")"),
                    "unsupported_content");
    }
    if (!part.contains("text") || !part["text"].is_string()) {
      invalid_field(part_where, str("'", part_where, ".text' must be a string"), "invalid_type");
    }
    if (!text.empty()) text += "\n";  // as vLLM joins text parts
    text += part["text"].get<std::string>();
  }
  return text;
}

nlohmann::ordered_json read_messages(const nlohmann::json& body) {
  const auto* field = find_field(body, "messages");
  if (!field) invalid_field("messages", "'messages' is missing; send a list of {\"role\": ..., \"content\": ...} objects", "missing_required_parameter");
  if (!field->is_array()) {
    invalid_field("messages", str("'messages' must be an array of {\"role\", \"content\"} objects, got ", describe_type(*field)),
                  "invalid_type");
  }
  if (field->empty()) invalid_field("messages", "'messages' is empty; send at least one message");
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < field->size(); ++i) {
    const auto& message = (*field)[i];
    std::string where = str("messages[", i, "]");
    if (!message.is_object()) {
      invalid_field(where, str("'", where, "' must be an object with \"role\" and \"content\", got ", describe_type(message)),
                    "invalid_type");
    }
    auto role_it = message.find("role");
    if (role_it == message.end() || !role_it->is_string()) {
      invalid_field(where + ".role", str("'", where, ".role' must be one of system, developer, user, assistant, tool"),
                    role_it == message.end() ? "missing_required_parameter" : "invalid_type");
    }
    std::string role = role_it->get<std::string>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool") {
      invalid_field(where + ".role", str("'", where, ".role' is ", describe_value(*role_it),
                                         "; use one of system, developer, user, assistant, tool"));
    }
    if (role == "developer") role = "system";  // OpenAI's newer name; chat templates know "system"
    nlohmann::ordered_json normal;
    normal["role"] = role;
    normal["content"] = read_content(message, where);
    if (auto name = message.find("name"); name != message.end() && name->is_string()) normal["name"] = *name;
    messages.push_back(std::move(normal));
  }
  return messages;
}

std::vector<PromptInput> read_prompts(const nlohmann::json& body, const RequestLimits& limits) {
  const auto* field = find_field(body, "prompt");
  if (!field) invalid_field("prompt", "'prompt' is missing; send a string or an array of strings", "missing_required_parameter");
  auto token_ids = [](const nlohmann::json& array, const std::string& where) {
    PromptInput input;
    input.is_ids = true;
    for (std::size_t i = 0; i < array.size(); ++i) {
      const auto& id = array[i];
      if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
          id.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max()) {
        invalid_field("prompt", str("'", where, "[", i, "]' is ", describe_value(id), "; token ids are integers from 0 to the vocabulary size - 1"));
      }
      input.ids.push_back(static_cast<std::int32_t>(id.get<std::int64_t>()));
    }
    if (input.ids.empty()) invalid_field("prompt", str("'", where, "' is an empty list of token ids"));
    return input;
  };
  std::vector<PromptInput> prompts;
  if (field->is_string()) {
    prompts.push_back({.text = field->get<std::string>()});
  } else if (field->is_array() && !field->empty() && (*field)[0].is_number()) {
    prompts.push_back(token_ids(*field, "prompt"));  // one prompt as token ids
  } else if (field->is_array()) {
    if (field->empty()) invalid_field("prompt", "'prompt' is an empty array; send at least one prompt");
    if (field->size() > limits.max_prompts) {
      invalid_field("prompt", str("'prompt' has ", field->size(), " prompts; send at most ", limits.max_prompts, " per request"));
    }
    for (std::size_t i = 0; i < field->size(); ++i) {
      const auto& item = (*field)[i];
      std::string where = str("prompt[", i, "]");
      if (item.is_string()) {
        prompts.push_back({.text = item.get<std::string>()});
      } else if (item.is_array()) {
        prompts.push_back(token_ids(item, where));
      } else {
        invalid_field("prompt", str("'", where, "' must be a string or an array of token ids, got ", describe_type(item)),
                      "invalid_type");
      }
    }
  } else {
    invalid_field("prompt", str("'prompt' must be a string or an array of strings, got ", describe_type(*field), " (",
                                describe_value(*field), ")"),
                  "invalid_type");
  }
  return prompts;
}

}  // namespace

CompletionRequest parse_chat_request(const nlohmann::json& body, const RequestLimits& limits,
                                     const RequestDefaults& defaults) {
  CompletionRequest out;
  out.endpoint = Endpoint::chat_completions;
  out.messages = read_messages(body);
  read_common(body, limits, defaults, out);
  // max_completion_tokens is the newer name; it wins when both are sent.
  out.max_tokens = read_integer(body, "max_completion_tokens", 1, std::numeric_limits<std::int32_t>::max());
  if (!out.max_tokens) out.max_tokens = read_integer(body, "max_tokens", 1, std::numeric_limits<std::int32_t>::max());
  out.logprobs = read_bool(body, "logprobs").value_or(false);
  if (auto top = read_integer(body, "top_logprobs", 0, 20)) {
    if (!out.logprobs) invalid_field("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
    out.top_logprobs = *top;
  }
  if (const auto* tools = find_field(body, "tools"); tools && !(tools->is_array() && tools->empty())) {
    unsupported("tools", "(function calling)");
  }
  if (const auto* format = find_field(body, "response_format")) {
    if (!format->is_object() || format->value("type", std::string()) != "text") {
      unsupported("response_format", describe_value(*format));
    }
  }
  return out;
}

CompletionRequest parse_completion_request(const nlohmann::json& body, const RequestLimits& limits,
                                           const RequestDefaults& defaults) {
  CompletionRequest out;
  out.endpoint = Endpoint::completions;
  out.prompts = read_prompts(body, limits);
  read_common(body, limits, defaults, out);
  out.max_tokens = read_integer(body, "max_tokens", 1, std::numeric_limits<std::int32_t>::max());
  // Legacy logprobs: an integer count of alternatives (0 = the chosen token's only); null = off.
  if (auto count = read_integer(body, "logprobs", 0, 20)) {
    out.logprobs = true;
    out.top_logprobs = *count;
  }
  out.echo = read_bool(body, "echo").value_or(false);  // with logprobs, the prompt's tokens are scored too
  if (auto suffix = read_string(body, "suffix"); suffix && !suffix->empty()) unsupported("suffix", "(insertion)");
  if (auto best_of = read_integer(body, "best_of", 1, std::numeric_limits<std::int32_t>::max()); best_of && *best_of != out.n) {
    unsupported("best_of", std::to_string(*best_of));
  }
  return out;
}

}  // namespace dew::serve
