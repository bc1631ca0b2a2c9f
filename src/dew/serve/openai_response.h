#pragma once
// The JSON the OpenAI API answers with, built from plain values: whole responses, streamed chunks (as
// server-sent events), usage, both log-probability shapes (chat's content list, the legacy completions
// arrays), the model list. Kept apart from HTTP and the engine so the shapes are tested on their own.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/serve/choice_decoder.h"
#include "dew/serve/openai_request.h"

namespace dew::serve {

using Json = nlohmann::ordered_json;

struct Usage {
  std::int64_t prompt_tokens = 0, completion_tokens = 0;
  // Of prompt_tokens, those the engine's prefix cache supplied for every choice (OpenAI's
  // usage.prompt_tokens_details.cached_tokens).
  std::int64_t cached_tokens = 0;
  std::int64_t choices_counted = 0;
  // A finished choice: its completion tokens add up, its cached prompt tokens bound the request's.
  void add_choice(std::int64_t completion, std::int64_t cached) {
    completion_tokens += completion;
    cached_tokens = choices_counted == 0 ? cached : std::min(cached_tokens, cached);
    ++choices_counted;
  }
};

// "chatcmpl-..." or "cmpl-..." with 24 random hex digits.
std::string new_response_id(Endpoint endpoint);
// Seconds since the epoch (the "created" field).
std::int64_t unix_time();

Json usage_json(const Usage& usage);
// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
Json chat_logprobs_json(const std::vector<TokenLogprob>& entries);
// Completions: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}; offsets
// start at `first_offset` (the echoed prompt's length when echo is on).
Json completion_logprobs_json(const std::vector<TokenLogprob>& entries, std::size_t first_offset = 0);

// One finished choice of a whole (non-streamed) answer.
struct ChoiceResult {
  std::string text;
  std::vector<TokenLogprob> logprobs;
  std::string finish_reason;
  std::size_t text_offset = 0;  // completions: where the generated text starts (echo)
};

// What every response and chunk carries.
struct ResponseHeader {
  Endpoint endpoint = Endpoint::chat_completions;
  std::string id;
  std::int64_t created = 0;
  std::string model;
};

Json whole_response(const ResponseHeader& header, const std::vector<ChoiceResult>& choices, const Usage& usage,
                    bool logprobs);

// A streamed chunk for choice `index`. Chat: the first chunk of a choice carries role "assistant"
// (`first`); completions ignore it. `usage_null`: with include_usage every chunk but the last has
// "usage": null, as OpenAI sends it.
Json delta_chunk(const ResponseHeader& header, std::size_t index, const ChoiceDelta& delta, bool first,
                 bool logprobs, bool usage_null, std::size_t first_offset = 0);
// The last chunk with include_usage: empty choices and the usage.
Json usage_chunk(const ResponseHeader& header, const Usage& usage);

// A server-sent event carrying `json`, and the stream's end marker ("data: [DONE]").
std::string sse_event(const Json& json);
std::string sse_done();

// GET /v1/models.
Json models_json(const std::string& model, std::int64_t created);

// JSON text with invalid UTF-8 replaced instead of throwing (model output is checked, but a message that
// quotes a client's bytes might not be).
std::string dump_json(const Json& json);

}  // namespace dew::serve
