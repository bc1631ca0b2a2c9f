#include "dew/serve/job_builder.h"

#include <algorithm>
#include <random>

#include "dew/core/error.h"
#include "dew/serve/api_error.h"

namespace dew::serve {
namespace {

constexpr std::size_t kPromptTail = 4;  // prompt ids the detokenizer sees before the first generated one

struct Prompt {
  std::vector<std::int32_t> ids;
  std::string text;
};

std::vector<Prompt> tokenize(const CompletionRequest& request, const ServedModel& model) {
  const auto& tokenizer = *model.tokenizer;
  std::vector<Prompt> prompts;
  if (request.endpoint == Endpoint::chat_completions) {
    if (!tokenizer.chat_template) {
      throw ApiError(400, str("model '", model.name, "' has no chat template; use /v1/completions with a plain prompt"),
                     "messages", "no_chat_template");
    }
    std::string text;
    try {
      text = tokenizer.render_chat(request.messages, /*add_generation_prompt=*/true);
    } catch (const dew::Error& e) {
      // The template's own checks (raise_exception: roles must alternate, no system role, ...).
      throw ApiError(400, str("the chat template refused the messages: ", e.what()), "messages", "invalid_value");
    }
    // The template writes the special tokens (BOS, turn markers) itself, so they are encoded as such,
    // exactly as `dew chat` does.
    auto ids = tokenizer.tokenizer->encode(text, /*allow_special=*/true);
    prompts.push_back({{ids.begin(), ids.end()}, std::move(text)});
    return prompts;
  }
  for (std::size_t i = 0; i < request.prompts.size(); ++i) {
    const auto& input = request.prompts[i];
    Prompt prompt;
    if (input.is_ids) {
      for (std::size_t j = 0; j < input.ids.size(); ++j) {
        if (input.ids[j] >= model.vocab_size) {
          invalid_field("prompt", str("prompt ", i, " holds token id ", input.ids[j], " at index ", j,
                                      "; the model's vocabulary is [0, ", model.vocab_size, ")"));
        }
      }
      prompt.ids = input.ids;
      prompt.text = tokenizer.tokenizer->decode(input.ids);
    } else {
      auto ids = tokenizer.encode(input.text);  // BOS first when the tokenizer adds one, as `dew generate`
      prompt.ids.assign(ids.begin(), ids.end());
      prompt.text = input.text;
    }
    if (prompt.ids.empty()) {
      invalid_field("prompt", str("prompt ", i, " is empty and this tokenizer adds no BOS token; send at least one token of text"));
    }
    prompts.push_back(std::move(prompt));
  }
  return prompts;
}

}  // namespace

BuiltJob build_job(const CompletionRequest& request, const ServedModel& model) {
  auto prompts = tokenize(request, model);
  const char* prompt_field = request.endpoint == Endpoint::chat_completions ? "messages" : "prompt";
  const char* what = request.endpoint == Endpoint::chat_completions ? "the messages are" : "the prompt is";
  BuiltJob built;
  built.job = std::make_shared<ServeJob>();
  built.n = request.n;
  std::uint64_t seed = request.seed ? *request.seed : std::random_device{}() * 0x9E3779B97F4A7C15ull ^ std::random_device{}();
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    auto& prompt = prompts[p];
    const auto length = static_cast<std::int64_t>(prompt.ids.size());
    if (length >= model.context) {
      throw ApiError(400, str("this model's context is ", model.context, " tokens and ", what, " ", length,
                              " tokens", prompts.size() > 1 ? str(" (prompt ", p, ")") : std::string(),
                              ", leaving no room for a completion; shorten it"),
                     prompt_field, "context_length_exceeded");
    }
    // Absent: the model's recommended budget where it fits, else up to the context.
    std::int64_t max_tokens = request.max_tokens ? *request.max_tokens
                                                 : std::min(model.defaults.max_tokens.value_or(model.context), model.context - length);
    if (max_tokens > model.context - length) {
      throw ApiError(400, str("this model's context is ", model.context, " tokens; ", what, " ", length,
                              " tokens and max_tokens is ", max_tokens, ", together ", length + max_tokens,
                              ". Lower max_tokens to at most ", model.context - length, " or shorten the prompt"),
                     "max_tokens", "context_length_exceeded");
    }
    built.prompt_tokens += length;
    built.prompt_texts.push_back(prompt.text);
    std::vector<std::int32_t> tail(prompt.ids.end() - static_cast<std::ptrdiff_t>(std::min(kPromptTail, prompt.ids.size())),
                                   prompt.ids.end());
    for (std::int64_t j = 0; j < request.n; ++j) {
      inference::EngineRequest engine_request;
      engine_request.prompt = prompt.ids;
      auto& s = engine_request.sampling;
      s.temperature = request.temperature;
      s.top_k = request.top_k;
      s.top_p = request.top_p;
      s.min_p = request.min_p;
      s.repetition_penalty = request.repetition_penalty;
      if (!request.ignore_eos) s.eos_ids.assign(model.tokenizer->stop_ids.begin(), model.tokenizer->stop_ids.end());
      s.max_new_tokens = max_tokens;
      s.n = 1;
      s.seed = seed + static_cast<std::uint64_t>(built.job->requests.size());
      engine_request.presence_penalty = request.presence_penalty;
      engine_request.frequency_penalty = request.frequency_penalty;
      engine_request.top_logprobs = request.logprobs ? request.top_logprobs : 0;
      engine_request.prompt_logprobs = request.echo && request.logprobs;
      built.job->requests.push_back(std::move(engine_request));
      const auto* tokenizer = model.tokenizer->tokenizer.get();
      built.job->decoders.emplace_back(
          [tokenizer](std::span<const std::int32_t> ids) { return tokenizer->decode(ids); },
          ChoiceSettings{.end_ids = request.ignore_eos ? std::vector<std::int32_t>{} : model.tokenizer->stop_ids,
                         .stop = request.stop,
                         .logprobs = request.logprobs,
                         .prompt_tail = tail});
    }
  }
  return built;
}

}  // namespace dew::serve
