#include "dew/inference/generate.h"

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "dew/core/error.h"
#include "dew/core/machine_memory.h"
#include "dew/nn/kv_cache.h"

namespace dew::inference {

namespace {

// Puts the model in eval mode for the call and restores whatever mode it was in.
class EvalMode {
 public:
  explicit EvalMode(nn::CausalTransformer& model) : model_(model), was_training_(model->is_training()) { model_->eval(); }
  ~EvalMode() { model_->train(was_training_); }
  EvalMode(const EvalMode&) = delete;
  EvalMode& operator=(const EvalMode&) = delete;

 private:
  nn::CausalTransformer& model_;
  bool was_training_;
};

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

Generation generate_checked(nn::CausalTransformer& model, const std::vector<std::vector<std::int32_t>>& prompts,
                            const Sampling& sampling);

// A rough upper estimate of the bytes a generation holds at once (KV cache, the prefill's activations and
// the sampler's fp64 copies of the logits), in double so that no product overflows. On the CPU it is
// checked against the machine's memory before anything is allocated: prompts * n rows past it would
// otherwise die in the allocator (or in the OOM killer, with memory overcommitted).
void check_memory(const nn::CausalTransformerConfig& config, std::int64_t rows, std::int64_t longest,
                  const Sampling& sampling, c10::ScalarType dtype, const c10::Device& device) {
  if (!device.is_cpu()) return;  // the GPU's own allocator reports what does not fit (see generate())
  const double element = static_cast<double>(c10::elementSize(dtype));
  const double r = static_cast<double>(rows), capacity = static_cast<double>(longest + sampling.max_new_tokens);
  const double kv = 2.0 * static_cast<double>(config.num_layers) * r * capacity *
                    static_cast<double>(config.resolved_kv_heads() * config.resolved_head_dim()) * element;
  const double prefill = r * static_cast<double>(longest) * element *
                         static_cast<double>(4 * config.emb_features + 3 * config.resolved_mlp_features() +
                                             config.num_heads * (longest + sampling.max_new_tokens));
  const double logits = r * static_cast<double>(config.vocab_size) * 8.0 * 6.0;
  const double total = kv + prefill + logits;
  const auto memory = available_host_memory();
  if (memory && total > static_cast<double>(memory->bytes)) {
    dew::fail("generate: ", rows, " rows (prompts times sampling.n = ", sampling.n, ") of up to ",
              longest + sampling.max_new_tokens, " tokens need about ", total / kGiB, " GiB (KV cache ", kv / kGiB,
              " GiB), more than the ", static_cast<double>(memory->bytes) / kGiB, " GiB available (", memory->source,
              "); lower n, max_new_tokens or the number of prompts");
  }
}

// The logits of the rows still running must be finite: a NaN or an infinity comes from the model itself
// (its weights or an overflow), and would otherwise turn into an arbitrary token.
void check_finite(const at::Tensor& logits, std::int64_t step) {
  if (!at::isfinite(logits).all().item<bool>()) {
    dew::fail("the model produced non-finite logits at step ", step, " of generation; its weights may hold NaN/Inf");
  }
}

// The prompts left-padded into [rows, longest] ids, positions and segments (0 = padding), each prompt
// repeated n times; plus, for the repetition penalty, which tokens each row has seen.
struct PromptBatch {
  at::Tensor ids, positions, segments, seen;
  std::vector<std::int64_t> lengths;
};

PromptBatch left_padded(const std::vector<std::vector<std::int32_t>>& prompts, std::int64_t n, std::int64_t vocab,
                        bool track_seen) {
  std::int64_t rows = static_cast<std::int64_t>(prompts.size()) * n, longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, static_cast<std::int64_t>(p.size()));
  PromptBatch batch;
  batch.ids = at::zeros({rows, longest}, at::kLong);
  batch.positions = at::zeros({rows, longest}, at::kLong);
  batch.segments = at::zeros({rows, longest}, at::kLong);
  if (track_seen) batch.seen = at::zeros({rows, vocab}, at::kBool);
  auto ids = batch.ids.accessor<std::int64_t, 2>();
  auto positions = batch.positions.accessor<std::int64_t, 2>();
  auto segments = batch.segments.accessor<std::int64_t, 2>();
  std::optional<at::TensorAccessor<bool, 2>> seen;
  if (track_seen) seen.emplace(batch.seen.accessor<bool, 2>());
  for (std::int64_t row = 0; row < rows; ++row) {
    const auto& prompt = prompts[row / n];
    auto length = static_cast<std::int64_t>(prompt.size()), pad = longest - length;
    batch.lengths.push_back(length);
    for (std::int64_t j = 0; j < length; ++j) {
      ids[row][pad + j] = prompt[j];
      positions[row][pad + j] = j;
      segments[row][pad + j] = 1;
      if (seen) (*seen)[row][prompt[j]] = true;
    }
  }
  return batch;
}

// Keeps only the batch rows in `keep` (device int64 indices) in every per-row tensor of the cache.
void keep_rows(nn::KVCache& cache, const at::Tensor& keep) {
  for (auto& k : cache.keys) k = k.index_select(0, keep);
  for (auto& v : cache.values) v = v.index_select(0, keep);
  cache.positions = cache.positions.index_select(0, keep);
  cache.segments = cache.segments.index_select(0, keep);
}

}  // namespace

void check_generation_request(const nn::CausalTransformerConfig& config, const std::vector<std::vector<std::int32_t>>& prompts,
                   const Sampling& sampling) {
  sampling.validate();
  if (prompts.empty()) dew::fail("generate: no prompts given; pass at least one prompt of at least one token");
  std::size_t longest = 0;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty()) dew::fail("generate: prompt ", i, " is empty; a prompt needs at least one token");
    for (std::size_t j = 0; j < prompts[i].size(); ++j) {
      auto id = prompts[i][j];
      if (id < 0 || id >= config.vocab_size) {
        dew::fail("generate: prompt ", i, " holds token id ", id, " at index ", j, "; the model's vocabulary is [0, ",
                  config.vocab_size, ")");
      }
    }
    if (prompts[i].size() > prompts[longest].size()) longest = i;
  }
  auto length = static_cast<std::int64_t>(prompts[longest].size());
  // Compared as a difference: length + max_new_tokens overflows for a max_new_tokens near 2^63.
  if (sampling.max_new_tokens > config.max_seq_len - length) {
    dew::fail("generate: prompt ", longest, " has ", length, " tokens and max_new_tokens is ", sampling.max_new_tokens,
              "; together they exceed the model's max_seq_len of ", config.max_seq_len,
              ". Shorten the prompt or lower max_new_tokens");
  }
  for (auto id : sampling.eos_ids) {
    if (id < 0 || id >= config.vocab_size) {
      dew::fail("sampling.eos_ids holds ", id, ", outside the model's vocabulary [0, ", config.vocab_size, ")");
    }
  }
}


Generation generate(nn::CausalTransformer& model, const std::vector<std::vector<std::int32_t>>& prompts,
                    const Sampling& sampling) {
  const auto& config = model->config();
  check_generation_request(config, prompts, sampling);
  std::int64_t longest_prompt = 0;
  for (const auto& p : prompts) longest_prompt = std::max(longest_prompt, static_cast<std::int64_t>(p.size()));
  check_memory(config, static_cast<std::int64_t>(prompts.size()) * sampling.n, longest_prompt, sampling,
               model->compute_dtype(), model->output_weight().device());
  try {
    return generate_checked(model, prompts, sampling);
  } catch (const c10::OutOfMemoryError& e) {
    dew::fail("generate: out of memory on ", model->output_weight().device(), " for ", prompts.size(), " prompts times ",
              sampling.n, " continuations of up to ", longest_prompt + sampling.max_new_tokens,
              " tokens; lower n, max_new_tokens or the number of prompts");
  }
}

namespace {

// generate() once the request is known to be valid.
Generation generate_checked(nn::CausalTransformer& model, const std::vector<std::vector<std::int32_t>>& prompts,
                            const Sampling& sampling) {
  const auto& config = model->config();
  at::NoGradGuard no_grad;
  EvalMode eval_mode(model);
  auto device = model->output_weight().device();
  bool penalize = sampling.repetition_penalty != 1.0;
  const std::unordered_set<std::int64_t> eos(sampling.eos_ids.begin(), sampling.eos_ids.end());

  auto batch = left_padded(prompts, sampling.n, config.vocab_size, penalize);
  const std::int64_t rows = batch.ids.size(0), longest = batch.ids.size(1);
  auto cache = nn::KVCache::allocate(config, rows, longest + sampling.max_new_tokens, model->compute_dtype(), device);
  auto seen = penalize ? batch.seen.to(device) : at::Tensor();
  auto next_position = at::tensor(batch.lengths, at::kLong).to(device);
  Sampler sampler(sampling, rows);

  Generation out;
  out.n = sampling.n;
  out.tokens.resize(rows);
  out.logprobs.resize(rows);
  out.stopped_at_eos.assign(rows, false);

  // Prefill: only the last position's logits are needed (the last slot is real in every row).
  auto hidden = model->hidden_states({batch.ids.to(device), batch.positions.to(device), batch.segments.to(device), &cache});
  auto logits = model->logits(hidden.narrow(1, longest - 1, 1)).squeeze(1);
  check_finite(logits, 1);

  // Rows still running, as indices into the original rows; finished rows are dropped from the batch
  // (cache included) so later steps compute only for the rows that still matter.
  std::vector<std::int64_t> running(rows);
  for (std::int64_t r = 0; r < rows; ++r) running[r] = r;
  for (std::int64_t step = 0;; ++step) {
    auto running_index = at::tensor(running, at::kLong);
    auto chosen = sampler.pick(process_logits(logits, seen, sampling), running_index);
    auto logprob = at::log_softmax(logits, -1).gather(1, chosen.unsqueeze(1)).squeeze(1);
    auto chosen_cpu = chosen.to(at::kCPU);
    auto logprob_cpu = logprob.to(at::kCPU);
    auto chosen_at = chosen_cpu.accessor<std::int64_t, 1>();
    auto logprob_at = logprob_cpu.accessor<float, 1>();

    std::vector<std::int64_t> keep, still_running;
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(running.size()); ++i) {
      auto row = running[i];
      auto token = chosen_at[i];
      out.tokens[row].push_back(static_cast<std::int32_t>(token));
      out.logprobs[row].push_back(logprob_at[i]);
      if (eos.count(token)) {
        out.stopped_at_eos[row] = true;
      } else {
        keep.push_back(i);
        still_running.push_back(row);
      }
    }
    if (still_running.empty() || step + 1 == sampling.max_new_tokens) break;

    if (still_running.size() < running.size()) {
      auto keep_index = at::tensor(keep, at::kLong).to(device);
      keep_rows(cache, keep_index);
      chosen = chosen.index_select(0, keep_index);
      next_position = next_position.index_select(0, keep_index);
      if (penalize) seen = seen.index_select(0, keep_index);
      running = std::move(still_running);
    }
    if (penalize) seen.scatter_(1, chosen.unsqueeze(1), true);

    auto k = static_cast<std::int64_t>(running.size());
    auto segment = at::ones({k, 1}, at::TensorOptions().dtype(at::kLong).device(device));
    hidden = model->hidden_states({chosen.view({k, 1}), next_position.view({k, 1}), segment, &cache});
    logits = model->logits(hidden).squeeze(1);
    check_finite(logits, step + 2);
    next_position = next_position + 1;
  }

  for (const auto& t : out.tokens) out.lengths.push_back(static_cast<std::int64_t>(t.size()));
  return out;
}

}  // namespace

}  // namespace dew::inference
