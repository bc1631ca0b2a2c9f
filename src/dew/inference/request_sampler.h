#pragma once
// One request's sampling state in the step engine: its settings, its penalties' memory of the tokens it has
// seen, and its own random stream. A request's draws depend only on its seed and on how many tokens it has
// drawn, never on which other requests share the batch: the stream is a Sampler of one row seeded with the
// request's seed, which draws exactly one uniform number per sampled token (none when greedy).
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "dew/inference/sampling.h"

namespace dew::inference {

// OpenAI's presence and frequency penalties on fp32 logits [rows, vocab]: logit - frequency * count -
// presence * (count > 0), where `counts` ([rows, vocab] fp32) counts each token among the generated ones.
at::Tensor apply_presence_frequency(const at::Tensor& logits, const at::Tensor& counts, double presence, double frequency);

class RequestSampler {
 public:
  // `prompt` seeds the repetition penalty's memory (the prompt's tokens count as seen, as transformers does).
  RequestSampler(const Sampling& sampling, double presence_penalty, double frequency_penalty,
                 const std::vector<std::int32_t>& prompt, std::int64_t vocab, c10::Device device);

  // True when the pick is the argmax of the raw logits: greedy with no penalty, so the engine can take a
  // whole batch's argmax at once.
  bool plain_greedy() const { return plain_greedy_; }
  // logits: this request's raw fp32 logits [1, vocab] -> the chosen id [1] int64 on the logits' device.
  // Penalties in vLLM's order (repetition, then frequency and presence), then process_logits' filters.
  at::Tensor pick(const at::Tensor& logits);
  // One token for each of k requests at once: logits [k, vocab] fp32, row i the raw logits of samplers[i]'s
  // request -> ids [k] int64 on the CPU, -1 for a row left with no token of positive probability. Requests
  // with the same filters (temperature, top-k, top-p, min-p) go through the filters and the draw together
  // (one softmax, sort and cumulative sum over the group), each drawing its own uniform number from its own
  // stream: every request gets exactly the token pick() would give it, for a fraction of the calls.
  static at::Tensor pick_together(const std::vector<RequestSampler*>& samplers, const at::Tensor& logits);
  // Records a token the request produced (penalty memory).
  void observe(std::int32_t token);

 private:
  at::Tensor penalized(const at::Tensor& logits) const;  // repetition, then frequency and presence

  Sampling filters_;  // the request's settings without the repetition penalty, applied before them here
  double repetition_penalty_, presence_, frequency_;
  bool plain_greedy_;
  at::Tensor seen_;    // [1, vocab] bool: prompt + generated tokens (repetition penalty on)
  at::Tensor counts_;  // [1, vocab] fp32: generated tokens (presence or frequency penalty on)
  Sampler sampler_;
};

}  // namespace dew::inference
