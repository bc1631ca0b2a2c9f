#include "dew/serve/openai_response.h"

#include <chrono>
#include <random>

namespace dew::serve {

std::string new_response_id(Endpoint endpoint) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = endpoint == Endpoint::chat_completions ? "chatcmpl-" : "cmpl-";
  for (int i = 0; i < 24; ++i) id += kHex[random() & 15];
  return id;
}

std::int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Json usage_json(const Usage& usage) {
  Json out;
  out["prompt_tokens"] = usage.prompt_tokens;
  out["completion_tokens"] = usage.completion_tokens;
  out["total_tokens"] = usage.prompt_tokens + usage.completion_tokens;
  out["prompt_tokens_details"] = {{"cached_tokens", usage.cached_tokens}};
  return out;
}

namespace {

Json byte_list(const std::string& bytes) {
  Json list = Json::array();
  for (char c : bytes) list.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return list;
}

Json chat_token_json(const TokenAlternative& token) {
  Json out;
  out["token"] = token.token;
  out["logprob"] = token.logprob;
  out["bytes"] = byte_list(token.bytes);
  return out;
}

const char* object_name(Endpoint endpoint, bool chunk) {
  if (endpoint == Endpoint::chat_completions) return chunk ? "chat.completion.chunk" : "chat.completion";
  return "text_completion";
}

Json header_json(const ResponseHeader& header, bool chunk) {
  Json out;
  out["id"] = header.id;
  out["object"] = object_name(header.endpoint, chunk);
  out["created"] = header.created;
  out["model"] = header.model;
  return out;
}

}  // namespace

Json chat_logprobs_json(const std::vector<TokenLogprob>& entries) {
  Json content = Json::array();
  for (const auto& entry : entries) {
    Json item = chat_token_json(entry.chosen);
    Json top = Json::array();
    for (const auto& alt : entry.top) top.push_back(chat_token_json(alt));
    item["top_logprobs"] = std::move(top);
    content.push_back(std::move(item));
  }
  Json out;
  out["content"] = std::move(content);
  out["refusal"] = nullptr;
  return out;
}

Json completion_logprobs_json(const std::vector<TokenLogprob>& entries, std::size_t first_offset) {
  Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array(), offsets = Json::array();
  for (const auto& entry : entries) {
    tokens.push_back(entry.chosen.token);
    if (!entry.has_logprob) {  // the prompt's first token: OpenAI sends null for its score and alternatives
      token_logprobs.push_back(nullptr);
      top.push_back(nullptr);
      offsets.push_back(entry.text_offset);
      continue;
    }
    token_logprobs.push_back(entry.chosen.logprob);
    Json alternatives = Json::object();
    // Two alternatives with the same text (different ids) keep the more likely one: a JSON object
    // cannot hold both, and the list is most likely first.
    for (const auto& alt : entry.top)
      if (!alternatives.contains(alt.token)) alternatives[alt.token] = alt.logprob;
    top.push_back(std::move(alternatives));
    offsets.push_back((entry.in_prompt ? 0 : first_offset) + entry.text_offset);
  }
  Json out;
  out["tokens"] = std::move(tokens);
  out["token_logprobs"] = std::move(token_logprobs);
  out["top_logprobs"] = std::move(top);
  out["text_offset"] = std::move(offsets);
  return out;
}

Json whole_response(const ResponseHeader& header, const std::vector<ChoiceResult>& choices, const Usage& usage,
                    bool logprobs) {
  Json out = header_json(header, false);
  Json list = Json::array();
  for (std::size_t i = 0; i < choices.size(); ++i) {
    const auto& choice = choices[i];
    Json item;
    item["index"] = i;
    if (header.endpoint == Endpoint::chat_completions) {
      Json message;
      message["role"] = "assistant";
      message["content"] = choice.text;
      item["message"] = std::move(message);
      item["logprobs"] = logprobs ? chat_logprobs_json(choice.logprobs) : Json(nullptr);
    } else {
      item["text"] = choice.text;
      item["logprobs"] = logprobs ? completion_logprobs_json(choice.logprobs, choice.text_offset) : Json(nullptr);
    }
    item["finish_reason"] = choice.finish_reason;
    list.push_back(std::move(item));
  }
  out["choices"] = std::move(list);
  out["usage"] = usage_json(usage);
  return out;
}

Json delta_chunk(const ResponseHeader& header, std::size_t index, const ChoiceDelta& delta, bool first, bool logprobs,
                 bool usage_null, std::size_t first_offset) {
  Json out = header_json(header, true);
  Json item;
  item["index"] = index;
  if (header.endpoint == Endpoint::chat_completions) {
    Json message = Json::object();
    if (first) message["role"] = "assistant";
    // The closing chunk carries an empty delta, as OpenAI's does.
    if (first || !delta.text.empty() || !delta.finish_reason) message["content"] = delta.text;
    item["delta"] = std::move(message);
    item["logprobs"] = logprobs && !delta.logprobs.empty() ? chat_logprobs_json(delta.logprobs) : Json(nullptr);
  } else {
    item["text"] = delta.text;
    item["logprobs"] = logprobs && !delta.logprobs.empty() ? completion_logprobs_json(delta.logprobs, first_offset)
                                                           : Json(nullptr);
  }
  item["finish_reason"] = delta.finish_reason ? Json(*delta.finish_reason) : Json(nullptr);
  out["choices"] = Json::array({std::move(item)});
  if (usage_null) out["usage"] = nullptr;
  return out;
}

Json usage_chunk(const ResponseHeader& header, const Usage& usage) {
  Json out = header_json(header, true);
  out["choices"] = Json::array();
  out["usage"] = usage_json(usage);
  return out;
}

std::string sse_event(const Json& json) { return "data: " + dump_json(json) + "\n\n"; }
std::string sse_done() { return "data: [DONE]\n\n"; }

Json models_json(const std::string& model, std::int64_t created) {
  Json entry;
  entry["id"] = model;
  entry["object"] = "model";
  entry["created"] = created;
  entry["owned_by"] = "dew";
  Json out;
  out["object"] = "list";
  out["data"] = Json::array({std::move(entry)});
  return out;
}

std::string dump_json(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace dew::serve
