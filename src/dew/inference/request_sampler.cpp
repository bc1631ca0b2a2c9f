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

at::Tensor RequestSampler::penalized(const at::Tensor& logits) const {
  auto x = repetition_penalty_ != 1.0 ? apply_repetition_penalty(logits, seen_, repetition_penalty_) : logits;
  if (counts_.defined()) x = apply_presence_frequency(x, counts_, presence_, frequency_);
  return x;
}

at::Tensor RequestSampler::pick(const at::Tensor& logits) {
  if (plain_greedy_) return logits.argmax(-1);
  return sampler_.pick(process_logits(penalized(logits), {}, filters_));
}

namespace {

bool same_filters(const Sampling& a, const Sampling& b) {
  return a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p && a.min_p == b.min_p;
}

}  // namespace

at::Tensor RequestSampler::pick_together(const std::vector<RequestSampler*>& samplers, const at::Tensor& logits) {
  const auto k = static_cast<std::int64_t>(samplers.size());
  auto out = at::empty({k}, at::kLong);
  auto out_at = out.accessor<std::int64_t, 1>();
  std::vector<bool> done(static_cast<std::size_t>(k), false);
  for (std::int64_t i = 0; i < k; ++i) {
    if (done[static_cast<std::size_t>(i)]) continue;
    const Sampling& filters = samplers[static_cast<std::size_t>(i)]->filters_;
    std::vector<std::int64_t> group;
    std::vector<at::Tensor> rows, uniforms;
    for (std::int64_t j = i; j < k; ++j) {
      auto* s = samplers[static_cast<std::size_t>(j)];
      if (done[static_cast<std::size_t>(j)] || !same_filters(s->filters_, filters)) continue;
      done[static_cast<std::size_t>(j)] = true;
      group.push_back(j);
      rows.push_back(s->penalized(logits.narrow(0, j, 1)));
      if (!filters.greedy()) uniforms.push_back(s->sampler_.uniforms());
    }
    auto processed = process_logits(rows.size() == 1 ? rows[0] : at::cat(rows), {}, filters);
    auto ids = filters.greedy() ? processed.argmax(-1)
                                : Sampler::draw(processed, uniforms.size() == 1 ? uniforms[0] : at::cat(uniforms));
    ids = ids.to(at::kCPU);
    auto ids_at = ids.accessor<std::int64_t, 1>();
    for (std::size_t g = 0; g < group.size(); ++g) out_at[group[g]] = ids_at[static_cast<std::int64_t>(g)];
  }
  return out;
}

void RequestSampler::observe(std::int32_t token) {
  // narrow + fill_ rather than an index tensor: no allocation per token.
  if (seen_.defined()) seen_.narrow(1, token, 1).fill_(true);
  if (counts_.defined()) counts_.narrow(1, token, 1).add_(1.0);
}

}  // namespace dew::inference
