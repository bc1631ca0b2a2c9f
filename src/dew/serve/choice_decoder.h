#pragma once
// One choice's generated tokens -> what the client is sent: text deltas (UTF-8 whole, stop strings cut),
// the log-probabilities of the tokens, and the finish reason. It runs on the serving loop's thread inside
// the engine's callback, so a stop string ends the request before the next step; it knows nothing of the
// engine or HTTP, so it is tested with a fake decoder.
//
//   ids -> IncrementalDetokenizer (bytes) -> Utf8Holdback (whole characters) -> StopMatcher (held-back stop
//   prefixes) -> text
//
// End-of-turn ids (the tokenizer's stop ids) end the text without adding to it and get no log-probability
// entry, as `dew chat` drops them.
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dew/serve/incremental_detokenizer.h"
#include "dew/serve/stop_matcher.h"
#include "dew/serve/utf8_holdback.h"

namespace dew::serve {

struct TokenAlternative {
  std::string token;  // its text, invalid UTF-8 replaced (the raw bytes are in `bytes`)
  std::string bytes;  // the token's own bytes
  float logprob = 0;
};

struct TokenLogprob {
  TokenAlternative chosen;
  std::vector<TokenAlternative> top;  // most likely first
  std::size_t text_offset = 0;        // code points of the choice's text before this token
  bool in_prompt = false;             // echo: a prompt token; its offset counts from the prompt's start
  bool has_logprob = true;            // false for the prompt's first token, which nothing predicts (JSON null)
};

// A prompt token's score from the engine: its log-probability and the alternatives (id, log-probability).
struct PromptTokenScore {
  float logprob = 0;
  std::vector<std::pair<std::int32_t, float>> top;
};

struct ChoiceDelta {
  std::string text;
  std::vector<TokenLogprob> logprobs;         // only when asked for
  std::optional<std::string> finish_reason;   // set on the last delta: "stop", "length", ...
  bool empty() const { return text.empty() && logprobs.empty() && !finish_reason; }
};

struct ChoiceSettings {
  std::vector<std::int32_t> end_ids;       // end-of-turn ids: end the text, add none
  std::vector<std::string> stop;           // stop strings
  bool logprobs = false;
  std::vector<std::int32_t> prompt_tail;   // the last prompt ids, context for the first token's text
};

class ChoiceDecoder {
 public:
  using Decode = IncrementalDetokenizer::Decode;
  ChoiceDecoder(Decode decode, ChoiceSettings settings);

  // A generated token, its log-probability and the alternatives (id, log-probability) the engine reported.
  ChoiceDelta push(std::int32_t id, float logprob, std::span<const std::pair<std::int32_t, float>> top = {});
  // Echo with logprobs: entries for the prompt's tokens, to come before the generated ones; scores[j] is
  // prompt[j + 1]'s (the first token gets an entry without a log-probability, as OpenAI sends it). Offsets
  // count code points from the prompt's start, as the echoed text has them.
  ChoiceDelta prompt_logprobs(std::span<const std::int32_t> prompt, std::span<const PromptTokenScore> scores) const;
  // The end, for `reason` ("stop" at an end-of-turn id, "length" at max_tokens, ...): releases held text.
  // A stop string found earlier makes the reason "stop" whatever the engine says.
  ChoiceDelta finish(const std::string& reason);
  // A stop string completed: the request should end now.
  bool stopped() const { return stops_.stopped(); }
  std::int64_t tokens() const { return tokens_; }

 private:
  TokenAlternative describe(std::int32_t id, float logprob) const;

  Decode decode_;
  std::set<std::int32_t> end_ids_;
  bool want_logprobs_;
  IncrementalDetokenizer detokenizer_;
  Utf8Holdback utf8_;
  StopMatcher stops_;
  std::size_t produced_ = 0;  // code points decoded so far (text_offset of the next token)
  std::int64_t tokens_ = 0;
  bool finished_ = false;
};

}  // namespace dew::serve
