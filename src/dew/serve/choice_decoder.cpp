#include "dew/serve/choice_decoder.h"

namespace dew::serve {

ChoiceDecoder::ChoiceDecoder(Decode decode, ChoiceSettings settings)
    : decode_(decode),
      end_ids_(settings.end_ids.begin(), settings.end_ids.end()),
      want_logprobs_(settings.logprobs),
      detokenizer_(std::move(decode), std::move(settings.prompt_tail)),
      stops_(std::move(settings.stop)) {}

TokenAlternative ChoiceDecoder::describe(std::int32_t id, float logprob) const {
  std::int32_t one[] = {id};
  std::string bytes = decode_(one);
  return {valid_utf8(bytes), bytes, logprob};
}

ChoiceDelta ChoiceDecoder::push(std::int32_t id, float logprob, std::span<const std::pair<std::int32_t, float>> top) {
  ChoiceDelta delta;
  if (finished_ || stops_.stopped()) return delta;
  ++tokens_;
  if (end_ids_.count(id)) return delta;  // end of turn: the engine's final event follows
  std::string bytes = detokenizer_.push(id);
  if (want_logprobs_) {
    TokenLogprob entry{describe(id, logprob), {}, produced_};
    for (const auto& [alt, alt_logprob] : top) entry.top.push_back(describe(alt, alt_logprob));
    delta.logprobs.push_back(std::move(entry));
  }
  produced_ += utf8_length(bytes);  // counts lead bytes: a character split across tokens counts once
  auto piece = stops_.push(utf8_.push(bytes));
  delta.text = std::move(piece.text);
  return delta;
}

ChoiceDelta ChoiceDecoder::prompt_logprobs(std::span<const std::int32_t> prompt,
                                          std::span<const PromptTokenScore> scores) const {
  ChoiceDelta delta;
  IncrementalDetokenizer pieces(decode_, {});
  std::size_t offset = 0;
  for (std::size_t j = 0; j < prompt.size(); ++j) {
    TokenLogprob entry{describe(prompt[j], 0.0f), {}, offset, /*in_prompt=*/true, /*has_logprob=*/j > 0};
    if (j > 0 && j - 1 < scores.size()) {
      entry.chosen.logprob = scores[j - 1].logprob;
      for (const auto& [alt, alt_logprob] : scores[j - 1].top) entry.top.push_back(describe(alt, alt_logprob));
    }
    offset += utf8_length(pieces.push(prompt[j]));
    delta.logprobs.push_back(std::move(entry));
  }
  return delta;
}

ChoiceDelta ChoiceDecoder::finish(const std::string& reason) {
  ChoiceDelta delta;
  if (finished_) return delta;
  finished_ = true;
  if (!stops_.stopped()) {
    auto piece = stops_.push(utf8_.flush());
    delta.text = std::move(piece.text);
    if (!piece.stopped) delta.text += stops_.flush();
  }
  delta.finish_reason = stops_.stopped() ? std::string("stop") : reason;
  return delta;
}

}  // namespace dew::serve
