#include "dew/inference/request_sampler.h"

namespace dew::inference {

at::Tensor apply_presence_frequency(const at::Tensor& logits, const at::Tensor& counts, double presence, double frequency) {
  auto out = logits;
  if (frequency != 0.0) out = out - counts * frequency;
  if (presence != 0.0) out = out - (counts > 0).to(logits.scalar_type()) * presence;
  return out;
}

namespace {
Sampling without_repetition_penalty(Sampling s) {
  s.repetition_penalty = 1.0;
  return s;
}
}  // namespace

RequestSampler::RequestSampler(const Sampling& sampling, double presence_penalty, double frequency_penalty,
                               const std::vector<std::int32_t>& prompt, std::int64_t vocab, c10::Device device)
    : filters_(without_repetition_penalty(sampling)),
      repetition_penalty_(sampling.repetition_penalty),
      presence_(presence_penalty),
      frequency_(frequency_penalty),
      plain_greedy_(sampling.greedy() && sampling.repetition_penalty == 1.0 && presence_penalty == 0.0 &&
                    frequency_penalty == 0.0),
      sampler_(sampling, 1) {
  if (repetition_penalty_ != 1.0) {
    auto seen = at::zeros({1, vocab}, at::kBool);
    auto flags = seen.accessor<bool, 2>();
    for (auto id : prompt) flags[0][id] = true;
    seen_ = seen.to(device);
  }
  if (presence_ != 0.0 || frequency_ != 0.0) counts_ = at::zeros({1, vocab}, at::TensorOptions().dtype(at::kFloat).device(device));
}

at::Tensor RequestSampler::pick(const at::Tensor& logits) {
  if (plain_greedy_) return logits.argmax(-1);
  auto x = repetition_penalty_ != 1.0 ? apply_repetition_penalty(logits, seen_, repetition_penalty_) : logits;
  if (counts_.defined()) x = apply_presence_frequency(x, counts_, presence_, frequency_);
  return sampler_.pick(process_logits(x, {}, filters_));
}

void RequestSampler::observe(std::int32_t token) {
  // narrow + fill_ rather than an index tensor: no allocation per token.
  if (seen_.defined()) seen_.narrow(1, token, 1).fill_(true);
  if (counts_.defined()) counts_.narrow(1, token, 1).add_(1.0);
}

}  // namespace dew::inference
