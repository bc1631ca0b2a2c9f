// dew-llama-greedy: llama.cpp itself loads a GGUF file, tokenizes a text with the file's vocabulary and
// continues it greedily; prints one JSON line {"prompt": [ids], "tokens": [ids], "logits": [[top-2], ...]}.
// The export tests run it on every GGUF dew writes (tests/interop_gguf_llama_cpp_test.cpp): a file llama.cpp
// refuses (an unknown pre-tokenizer, a missing key, a tensor of the wrong shape) fails there with
// llama.cpp's own message, and its tokens are compared with dew's.
//
//   dew-llama-greedy MODEL.gguf TEXT N [--ids 1,2,3]
// --ids gives the prompt as token ids instead of tokenizing TEXT (still printed as "prompt").
// Greedy = the first index of the largest logit, as torch's argmax picks it, so ties break alike.
// Built against the llama.cpp of the pinned llama-cpp-python sdist by scripts/setup_llama_cpp.sh.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "dew-llama-greedy: %s\n", message.c_str());
  return 1;
}

// llama.cpp's informational log goes to stderr only when it is an error or a warning, so a test's output
// holds what went wrong and not the loader's listing of every tensor.
void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) std::fputs(text, stderr);
}

std::vector<llama_token> parse_ids(const char* list) {
  std::vector<llama_token> ids;
  for (const char* p = list; *p;) {
    char* end = nullptr;
    ids.push_back(static_cast<llama_token>(std::strtol(p, &end, 10)));
    p = (*end == ',') ? end + 1 : end;
    if (end == p && *p) break;
  }
  return ids;
}

std::vector<llama_token> tokenize(const llama_vocab* vocab, const std::string& text) {
  int n = -llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), nullptr, 0, true, false);
  std::vector<llama_token> ids(n > 0 ? n : 0);
  if (n > 0 && llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(), n, true, false) < 0)
    ids.clear();
  return ids;
}

std::string json_ids(const std::vector<llama_token>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "]";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && !(argc == 6 && std::strcmp(argv[4], "--ids") == 0))
    return fail("usage: dew-llama-greedy MODEL.gguf TEXT N [--ids 1,2,3]");
  const int n_new = std::atoi(argv[3]);
  llama_log_set(quiet_log, nullptr);
  llama_backend_init();
  llama_model_params model_params = llama_model_default_params();
  model_params.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], model_params);
  if (!model) return fail(std::string("llama.cpp could not load ") + argv[1]);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::vector<llama_token> prompt = argc == 6 ? parse_ids(argv[5]) : tokenize(vocab, argv[2]);
  if (prompt.empty()) return fail("the prompt has no tokens");

  llama_context_params context_params = llama_context_default_params();
  context_params.n_ctx = static_cast<uint32_t>(prompt.size() + n_new + 1);
  context_params.n_batch = static_cast<uint32_t>(prompt.size());
  context_params.n_threads = context_params.n_threads_batch = 1;
  llama_context* ctx = llama_init_from_model(model, context_params);
  if (!ctx) return fail("llama.cpp could not create a context");

  const int32_t n_vocab = llama_vocab_n_tokens(vocab);
  std::vector<llama_token> tokens, input = prompt;
  std::string top2 = "[";
  for (int step = 0; step < n_new; ++step) {
    if (llama_decode(ctx, llama_batch_get_one(input.data(), static_cast<int32_t>(input.size()))) != 0)
      return fail("llama_decode failed at step " + std::to_string(step));
    const float* logits = llama_get_logits_ith(ctx, -1);
    llama_token best = 0, second = n_vocab > 1 ? 1 : 0;
    for (llama_token t = 0; t < n_vocab; ++t)
      if (logits[t] > logits[best]) best = t;
    second = best == 0 ? (n_vocab > 1 ? 1 : 0) : 0;
    for (llama_token t = 0; t < n_vocab; ++t)
      if (t != best && logits[t] > logits[second]) second = t;
    char pair[64];
    std::snprintf(pair, sizeof pair, "%s[%.7g,%.7g]", step ? "," : "", logits[best], logits[second]);
    top2 += pair;
    tokens.push_back(best);
    input.assign(1, best);
  }
  std::printf("{\"prompt\": %s, \"tokens\": %s, \"logits\": %s]}\n", json_ids(prompt).c_str(), json_ids(tokens).c_str(),
              top2.c_str());
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
