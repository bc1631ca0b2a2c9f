#pragma once
// The step engine: continuous batching for a causal decoder. Requests join and leave between steps, each
// with its own cache slot, sampling settings, stop ids, token limit, seed and log-probabilities; one step
// runs the decode token of every running request together with prompt prefill chunks, under a token
// budget. `generate`, `dew chat`, GRPO rollouts and `dew serve` all decode through it.
//
// Single-threaded: submit(), cancel() and step() are called from one thread (serve/ wraps it in a loop
// thread with a locked queue). Greedy output for a request equals generate()'s for the same prompt and
// settings, whatever else is in the batch (up to float rounding of batched matmuls).
//
// CONTRACT (written before the implementation so that serve/ and the engine can be built side by side;
// the implementation may add members but keeps these names and meanings).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dew/inference/sampling.h"
#include "dew/nn/causal_transformer.h"

namespace dew::inference {

struct EngineOptions {
  std::int64_t max_batch = 16;        // requests decoding at once (cache slots)
  std::int64_t context = 0;           // tokens per slot (prompt + generated); 0 = the model's max_seq_len
  std::int64_t step_token_budget = 512;  // prompt + decode tokens one step may run
  // Prefix cache: a prompt that begins with tokens some cache row already holds (a running request's, or a
  // finished one's until its row is reused: a shared system prompt, the earlier turns of a conversation)
  // copies those slots instead of computing them. Requests with prompt_logprobs always compute every token.
  bool prefix_cache = true;
};

struct EngineRequest {
  std::vector<std::int32_t> prompt;    // non-empty, ids inside the vocabulary
  // temperature, top_k, top_p, min_p, repetition_penalty, eos_ids, max_new_tokens and seed apply per
  // request; n must be 1 (a caller wanting n continuations submits n requests with seeds seed, seed+1, ...
  // exactly as generate() numbers its rows).
  Sampling sampling;
  double presence_penalty = 0.0;       // OpenAI: subtracted once from every token already generated
  double frequency_penalty = 0.0;      // OpenAI: subtracted per occurrence among generated tokens
  std::int64_t top_logprobs = 0;       // alternatives reported per token (0..20)
  // Score the prompt too (OpenAI completions' echo with logprobs): each prompt token after the first gets its
  // log-probability given the tokens before it, and top_logprobs alternatives, from the prefill's forward
  // (every position's logits instead of the last one's). Reported with the first generated token.
  bool prompt_logprobs = false;
};

// Why a request ended.
enum class FinishReason { running, eos, length, stopped, cancelled, error };

struct EngineToken {
  std::int32_t id = 0;
  float logprob = 0;                   // log_softmax of the raw logits (as Generation::logprobs)
  std::vector<std::pair<std::int32_t, float>> top;  // top_logprobs alternatives, most likely first
};

// What the engine reports to a request's callback: one event per generated token (finish == running),
// then exactly one final event with the finish reason (token absent; for error, `error` says why).
struct EngineEvent {
  std::int64_t request = 0;
  FinishReason finish = FinishReason::running;
  std::optional<EngineToken> token;
  // With EngineRequest::prompt_logprobs, on the first token's event: prompt[j] scores prompt token j + 1.
  std::vector<EngineToken> prompt;
  std::string error;
  std::int64_t prompt_tokens = 0, completion_tokens = 0;
  std::int64_t cached_prompt_tokens = 0;  // of prompt_tokens, how many the prefix cache supplied
};

// The callback returns false to end the request now (stop string found, client gone): the request is
// finished with FinishReason::stopped and its slot freed before the next step.
using EngineCallback = std::function<bool(const EngineEvent&)>;

struct EngineStats {
  std::int64_t waiting = 0, running = 0;   // queue depth and batch size now
  std::int64_t steps = 0, prompt_tokens = 0, generated_tokens = 0;
  std::int64_t cached_prompt_tokens = 0;   // of prompt_tokens, copied from the prefix cache
};

class Engine {
 public:
  Engine(nn::CausalTransformer& model, EngineOptions options);
  ~Engine();
  // Checks the request (dew::Error naming the field: empty prompt, id outside the vocabulary, prompt +
  // max_new_tokens past the context, invalid sampling) and queues it; returns its id.
  std::int64_t submit(EngineRequest request, EngineCallback callback);
  // Ends a queued or running request (callback gets FinishReason::cancelled); unknown ids are ignored.
  void cancel(std::int64_t request);
  // One step: admits waiting requests into free slots, runs prefill chunks and one decode token per
  // running request, calls the callbacks. Returns false when nothing was waiting or running.
  bool step();
  void run_until_idle() { while (step()) {} }
  bool idle() const;
  EngineStats stats() const;
  const nn::CausalTransformerConfig& config() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dew::inference
