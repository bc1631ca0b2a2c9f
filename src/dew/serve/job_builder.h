#pragma once
// A parsed request -> a ServeJob: prompts rendered (chat template) and tokenized, lengths checked against
// the context, one engine request and one decoder per choice (n per prompt, choice index = prompt * n + j,
// seeds seed, seed + 1, ... as `dew generate` numbers its rows). Runs on the HTTP handler's thread, so
// the engine's thread only ever decodes.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dew/data/tokenizers/pretrained_tokenizer.h"
#include "dew/serve/openai_request.h"
#include "dew/serve/serve_job.h"

namespace dew::serve {

struct ServedModel {
  std::string name;                              // the id /v1/models lists and requests name
  const data::PretrainedTokenizer* tokenizer = nullptr;
  std::int64_t vocab_size = 0;
  std::int64_t context = 0;                      // tokens per request: prompt + completion
  RequestDefaults defaults;                      // for the sampling fields a request leaves out
};

struct BuiltJob {
  std::shared_ptr<ServeJob> job;
  std::vector<std::string> prompt_texts;  // per prompt: what echo puts before the completion
  std::int64_t prompt_tokens = 0;         // summed over prompts (not choices), for usage
  std::int64_t n = 1;
};

// ApiError 400 for what the model cannot take: no chat template, a prompt past the context
// (code context_length_exceeded), token ids outside the vocabulary.
BuiltJob build_job(const CompletionRequest& request, const ServedModel& model);

}  // namespace dew::serve
