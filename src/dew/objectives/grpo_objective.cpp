#include "dew/objectives/grpo_objective.h"

#include "dew/core/stream_seed.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>

#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/nn/frozen_weights.h"
#include "dew/nn/lora.h"
#include "dew/objectives/rewards/reward_spec.h"
#include "dew/objectives/shared_prompt_logprobs.h"
#include "dew/objectives/token_logprobs.h"

namespace dew::objectives {

// What one micro-batch's rollout leaves for the passes over it (and for a checkpoint between them).
struct GrpoObjective::Rollout {
  at::Tensor prompt_index;  // int64 [P], CPU: the batch it was sampled for
  at::Tensor ids;           // int64 [R, T], R = P * group_size: prompt + completion, right-padded with 0
  at::Tensor mask;          // float [R, T - 1]: 1 where the target (column t + 1) is a completion token
  at::Tensor old_logp;      // float [R, T - 1]: the policy's at the first pass (undefined before it)
  at::Tensor ref_logp;      // float [R, T - 1]: the reference's (undefined when beta == 0)
  at::Tensor advantages;    // float [R]
  at::Tensor rewards;       // double [R, K]: each reward's score, in the order of the rewards
  at::Tensor lengths;       // int64 [R]: completion tokens
  // Where the sampling pass's time went (seconds): generation, the rewards, the reference's log-probabilities.
  double rollout_seconds = 0, reward_seconds = 0, reference_seconds = 0;
};

namespace {

constexpr const char* kBuiltinPrefixes[] = {"exact_match", "last_number", "regex:"};

bool starts_spec(const std::string& piece) {
  for (const char* prefix : kBuiltinPrefixes) {
    if (piece.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

c10::Device device_of(torch::nn::Module& module) { return module.parameters().front().device(); }

std::vector<std::int64_t> to_vector(const at::Tensor& t) {
  auto c = t.to(at::kCPU, at::kLong).contiguous();
  return {c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel()};
}

}  // namespace

at::Tensor GrpoObjective::logprobs(nn::CausalTransformer& model, const at::Tensor& ids, const at::Tensor& mask) {
  if (config_.share_prompt) {
    if (auto shared = shared_prompt_token_logprobs(model, ids, mask, config_.group_size, config_.loss_chunk_tokens, config_.temperature)) {
      return *shared;
    }
  }
  return token_logprobs(model, ids, {}, {}, config_.loss_chunk_tokens, config_.temperature);
}

std::vector<std::string> GrpoObjectiveConfig::reward_specs() const {
  std::vector<std::string> specs;
  std::size_t start = 0;
  while (start <= reward.size() && !reward.empty()) {
    const std::size_t comma = reward.find(',', start);
    std::string piece = reward.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!specs.empty() && specs.back().rfind("regex:", 0) == 0 && !starts_spec(piece)) {
      specs.back() += "," + piece;  // a comma inside a regex
    } else if (!piece.empty()) {
      specs.push_back(piece);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return specs;
}

void GrpoObjectiveConfig::validate() const {
  GrpoConfig::validate();
  if (loss_chunk_tokens < 0) fail("grpo.loss_chunk_tokens must be >= 0 (0 = all at once), got ", loss_chunk_tokens);
  if (!(reward_timeout > 0 && std::isfinite(reward_timeout))) {
    fail("grpo.reward_timeout must be a positive number of seconds (how long --reward-cmd may take per rollout batch), got ",
         reward_timeout);
  }
  if (reward_specs().empty() && reward_cmd.empty()) {
    fail("GRPO needs a reward: pass --reward NAME (", rewards::known_reward_specs(),
         "; several comma-separated) or --reward-cmd CMD (sets grpo.reward / grpo.reward_cmd)");
  }
  for (const auto& spec : reward_specs()) (void)rewards::make_reward(spec);  // unknown names and bad regexes, by name
}

std::uint64_t rollout_seed(std::uint64_t seed, std::int64_t step, std::int64_t micro) {
  constexpr std::uint64_t kPurpose = 0x6772706f726f6c6cULL;  // "grporoll": a stream no other purpose draws
  return stream_seed(seed, kPurpose, step, micro);
}

GrpoObjective::GrpoObjective(GrpoSetup setup)
    : policy_(std::move(setup.policy)),
      reference_(std::move(setup.reference)),
      rollout_(std::move(setup.rollout)),
      load_reference_(std::move(setup.load_reference)),
      reference_is_base_(setup.reference_is_base),
      tokenizer_(setup.tokenizer),
      stop_ids_(std::move(setup.stop_ids)),
      prompts_(std::move(setup.prompts)),
      rewards_(std::move(setup.rewards)),
      config_(std::move(setup.config)),
      seed_(setup.seed) {
  config_.GrpoConfig::validate();  // the reward specs are the kind's to check: the rewards arrive made
  if (config_.loss_chunk_tokens < 0) fail("grpo.loss_chunk_tokens must be >= 0 (0 = all at once), got ", config_.loss_chunk_tokens);
  if (!policy_) fail("GrpoObjective needs a policy model");
  if (!rollout_) fail("GrpoObjective needs a rollout function (the run kind passes the decoding engine's)");
  if (reference_is_base_ && !nn::has_lora(*policy_)) fail("GrpoObjective: a base reference needs a policy with LoRA adapters");
  if (config_.beta > 0 && !reference_ && !load_reference_ && !reference_is_base_) fail("grpo.beta = ", config_.beta, " needs a reference model");
  if (!tokenizer_) fail("GrpoObjective needs a tokenizer to decode completions");
  if (rewards_.empty()) fail("GrpoObjective needs at least one reward");
  if (prompts_.empty()) fail("GrpoObjective needs prompts");
  if (reference_) freeze_reference();
}

void GrpoObjective::freeze_reference() {
  for (auto& p : reference_->parameters()) p.set_requires_grad(false);
  nn::store_frozen_weights_in_compute_dtype(reference_);  // exact, and less memory under mixed precision
  reference_->eval();
}

GrpoObjective::~GrpoObjective() = default;

void GrpoObjective::init(std::uint64_t seed) { policy_->init_parameters(seed); }

nlohmann::ordered_json GrpoObjective::config_json() const {
  nlohmann::ordered_json j;
  j["grpo"] = config::to_json(config_);
  j["model"] = config::to_json(policy_->config());
  return j;
}

void GrpoObjective::place_reference() {
  if (!reference_) {
    reference_ = load_reference_();
    freeze_reference();
  }
  const auto device = device_of(*policy_);
  if (device_of(*reference_) != device) reference_->to(device);
}

std::vector<double> GrpoObjective::score(const std::vector<std::int64_t>& prompt_rows,
                                         const std::vector<std::string>& completions,
                                         std::vector<std::vector<double>>* per_reward) {
  std::vector<rewards::RewardInput> inputs;
  inputs.reserve(completions.size());
  for (std::size_t r = 0; r < completions.size(); ++r) {
    const GrpoPrompt& p = prompts_[static_cast<std::size_t>(prompt_rows[r])];
    inputs.push_back({p.prompt, completions[r], p.ground_truth, p.extra_info, p.data_source});
  }
  std::vector<double> total(completions.size(), 0.0);
  per_reward->clear();
  for (auto& reward : rewards_) {
    std::vector<double> scores = reward->score(inputs);
    if (scores.size() != inputs.size()) {
      fail("reward '", reward->name(), "' gave ", scores.size(), " scores for ", inputs.size(), " completions");
    }
    for (std::size_t r = 0; r < scores.size(); ++r) {
      if (!std::isfinite(scores[r])) fail("reward '", reward->name(), "' gave a non-finite score (", scores[r], ")");
      total[r] += scores[r];
    }
    per_reward->push_back(std::move(scores));
  }
  return total;
}

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The rollout's rows as the loss reads them: prompt + completion ids right-padded to the longest, the
// completion targets' mask, each row's completion length and each reward's score per row.
struct RolloutRows {
  at::Tensor ids, mask, lengths, scores;
};

RolloutRows rollout_rows(const std::vector<std::vector<std::int32_t>>& prompts, const Rollouts& g,
                         const std::vector<std::vector<double>>& per_reward) {
  const std::int64_t rows = g.rows();
  std::int64_t width = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    width = std::max(width, static_cast<std::int64_t>(prompts[static_cast<std::size_t>(g.prompt_of(r))].size() +
                                                      g.tokens[static_cast<std::size_t>(r)].size()));
  }
  const auto k_rewards = static_cast<std::int64_t>(per_reward.size());
  RolloutRows out{at::zeros({rows, width}, at::kLong), at::zeros({rows, width - 1}, at::kFloat), at::empty({rows}, at::kLong),
                  at::empty({rows, k_rewards}, at::kDouble)};
  auto* id = out.ids.data_ptr<std::int64_t>();
  auto* m = out.mask.data_ptr<float>();
  auto* len = out.lengths.data_ptr<std::int64_t>();
  auto* sc = out.scores.data_ptr<double>();
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto& prompt = prompts[static_cast<std::size_t>(g.prompt_of(r))];
    const auto& tokens = g.tokens[static_cast<std::size_t>(r)];
    const auto lp = static_cast<std::int64_t>(prompt.size()), lc = static_cast<std::int64_t>(tokens.size());
    for (std::int64_t t = 0; t < lp; ++t) id[r * width + t] = prompt[static_cast<std::size_t>(t)];
    for (std::int64_t t = 0; t < lc; ++t) id[r * width + lp + t] = tokens[static_cast<std::size_t>(t)];
    // Column t predicts id t + 1: the completion's tokens are the targets of columns lp - 1 .. lp + lc - 2.
    for (std::int64_t t = lp - 1; t < lp + lc - 1; ++t) m[r * (width - 1) + t] = 1.0f;
    len[r] = lc;
    for (std::int64_t k = 0; k < k_rewards; ++k) sc[r * k_rewards + k] = per_reward[static_cast<std::size_t>(k)][static_cast<std::size_t>(r)];
  }
  return out;
}

}  // namespace

std::vector<std::vector<std::int32_t>> GrpoObjective::prompt_ids(const std::vector<std::int64_t>& index) const {
  std::vector<std::vector<std::int32_t>> prompts;
  for (auto i : index) {
    if (i < 0 || i >= static_cast<std::int64_t>(prompts_.size())) {
      fail("prompt_index ", i, " is outside the ", prompts_.size(), " prompts the objective holds");
    }
    prompts.push_back(prompts_[static_cast<std::size_t>(i)].ids);
  }
  return prompts;
}

std::vector<std::string> GrpoObjective::completion_texts(const Rollouts& g) const {
  // Without the stop token, as TRL decodes with skip_special_tokens.
  std::vector<std::string> completions;
  for (std::int64_t r = 0; r < g.rows(); ++r) {
    const auto& tokens = g.tokens[static_cast<std::size_t>(r)];
    const std::size_t text_tokens = tokens.size() - (g.stopped_at_eos[static_cast<std::size_t>(r)] ? 1 : 0);
    completions.push_back(tokenizer_->decode(std::span<const data::TokenId>(tokens.data(), text_tokens)));
  }
  return completions;
}

GrpoObjective::Rollout GrpoObjective::sample(const at::Tensor& prompt_index, std::int64_t step, std::int64_t micro) {
  const std::vector<std::int64_t> index = to_vector(prompt_index);
  const std::vector<std::vector<std::int32_t>> prompts = prompt_ids(index);
  RolloutRequest sampling;
  sampling.temperature = config_.temperature;
  sampling.top_p = config_.top_p;
  sampling.max_new_tokens = config_.max_new_tokens;
  sampling.n = config_.group_size;
  sampling.eos_ids = stop_ids_;
  sampling.seed = rollout_seed(seed_, step, micro);
  auto started = Clock::now();
  const Rollouts g = rollout_(policy_, prompts, sampling);
  Rollout out;
  out.rollout_seconds = seconds_since(started);

  std::vector<std::int64_t> row_prompt;
  for (std::int64_t r = 0; r < g.rows(); ++r) row_prompt.push_back(index[static_cast<std::size_t>(g.prompt_of(r))]);
  std::vector<std::vector<double>> per_reward;
  std::vector<double> total;
  started = Clock::now();
  try {
    total = score(row_prompt, completion_texts(g), &per_reward);
  } catch (const Error& e) {
    fail("GRPO step ", step + 1, ", rollout batch ", micro + 1, ": ", e.what(),
         "\nThe run stopped before this step; its checkpoints are intact, and the same command resumes from the last one");
  }
  out.reward_seconds = seconds_since(started);

  RolloutRows rows = rollout_rows(prompts, g, per_reward);
  const auto device = device_of(*policy_);
  out.prompt_index = prompt_index.to(at::kCPU, at::kLong).contiguous().clone();
  out.ids = rows.ids.to(device);
  out.mask = rows.mask.to(device);
  out.lengths = rows.lengths;
  out.rewards = rows.scores;
  out.advantages = group_advantages(at::tensor(total, at::kDouble).to(at::kFloat), config_.group_size, config_.scale_rewards).to(device);
  started = Clock::now();
  if (config_.beta > 0) out.ref_logp = reference_logprobs(out.ids, out.mask);
  out.reference_seconds = seconds_since(started);
  return out;
}

at::Tensor GrpoObjective::reference_logprobs(const at::Tensor& ids, const at::Tensor& mask) {
  at::NoGradGuard no_grad;
  if (reference_is_base_) {
    nn::AdaptersOff base(policy_);
    return logprobs(policy_, ids, mask).detach();
  }
  place_reference();
  return logprobs(reference_, ids, mask).detach();
}

Loss GrpoObjective::loss(const data::Batch& batch, std::int64_t step) {
  const at::Tensor index = batch.get("prompt_index").to(at::kCPU, at::kLong).contiguous();
  const std::int64_t micro = micro_.next(step);
  const std::int64_t group_step = step - step % config_.epochs;
  if (step == group_step) {
    if (micro == 0) {
      cache_.clear();
      cache_step_ = step;
    }
    cache_.push_back(sample(index, step, micro));
  } else {
    if (cache_step_ != group_step || micro >= static_cast<std::int64_t>(cache_.size())) {
      fail("GRPO step ", step + 1, " optimises the rollouts sampled at step ", group_step + 1, " again (grpo.epochs = ",
           config_.epochs, ") but they are not held", cache_step_ < 0 ? " (the checkpoint resumed from has no objective.safetensors)" : "",
           micro >= static_cast<std::int64_t>(cache_.size()) && cache_step_ == group_step
               ? str(" (that step had ", cache_.size(), " micro-batches; trainer.grad_accum changed mid-group?)") : std::string(),
           "; resume from a checkpoint whose step is a multiple of grpo.epochs, with the same trainer.batch_size and grad_accum");
    }
    if (!cache_[static_cast<std::size_t>(micro)].prompt_index.equal(index)) {
      fail("GRPO step ", step + 1, " micro-batch ", micro + 1, " reads other prompts than the rollout of step ", group_step + 1,
           " it optimises again: trainer.batch_size or trainer.grad_accum changed mid-group. Resume with the values the "
           "group started with, or from a checkpoint whose step is a multiple of grpo.epochs (", config_.epochs, ")");
    }
  }
  Rollout& r = cache_[static_cast<std::size_t>(micro)];
  const auto device = device_of(*policy_);
  const at::Tensor ids = r.ids.to(device), mask = r.mask.to(device);
  const at::Tensor logp = logprobs(policy_, ids, mask);
  if (!r.old_logp.defined()) r.old_logp = logp.detach();  // the first pass: the weights that sampled
  const at::Tensor ref = r.ref_logp.defined() ? r.ref_logp.to(device) : at::Tensor();
  const GrpoTokenTerms terms = grpo_token_terms(logp, r.old_logp.to(device), ref, r.advantages.to(device), config_);

  Loss out;
  out.sum = (terms.loss * mask).sum();
  out.count = mask.sum().item<double>();
  out.metrics = grpo_token_metrics(terms, mask);
  // The rollout's rewards (every pass over it reports them, so each step's line has them).
  const at::Tensor per_reward = r.rewards.to(at::kCPU);
  const at::Tensor total = per_reward.sum(1);
  const auto rows = static_cast<double>(total.size(0));
  out.metrics.add("reward/mean", total.sum().item<double>(), rows);
  const at::Tensor groups = total.view({-1, config_.group_size});
  out.metrics.add("reward/std", groups.std(at::IntArrayRef{1}, /*unbiased=*/true, /*keepdim=*/false).sum().item<double>(), static_cast<double>(groups.size(0)));
  for (std::size_t k = 0; k < rewards_.size(); ++k) {
    out.metrics.add("reward/" + rewards_[k]->name(), per_reward.select(1, static_cast<std::int64_t>(k)).sum().item<double>(), rows);
  }
  out.metrics.add("completion_length", static_cast<double>(r.lengths.sum().item<std::int64_t>()), rows);
  if (step == group_step) {  // the sampling pass: where its time went (later passes reuse the rollout)
    out.metrics.add("time/rollout_seconds", r.rollout_seconds, 1);
    out.metrics.add("time/reward_seconds", r.reward_seconds, 1);
    out.metrics.add("time/reference_seconds", r.reference_seconds, 1);
  }
  return out;
}

Statistics GrpoObjective::evaluate(const data::Batch& batch) {
  const std::vector<std::int64_t> index = to_vector(batch.get("prompt_index"));
  RolloutRequest sampling;
  sampling.temperature = 0;  // greedy: the validation reward is a function of the weights alone
  sampling.max_new_tokens = config_.max_new_tokens;
  sampling.eos_ids = stop_ids_;
  const Rollouts g = rollout_(policy_, prompt_ids(index), sampling);
  const std::vector<std::string> completions = completion_texts(g);
  Statistics stats;
  double length = 0;
  for (const auto& tokens : g.tokens) length += static_cast<double>(tokens.size());
  std::vector<std::vector<double>> per_reward;
  std::vector<double> total;
  try {
    total = score(index, completions, &per_reward);
  } catch (const Error& e) {
    fail("GRPO evaluation: ", e.what());
  }
  const auto rows = static_cast<double>(total.size());
  double sum = 0;
  for (double v : total) sum += v;
  stats.add("reward", sum, rows);
  for (std::size_t k = 0; k < rewards_.size(); ++k) {
    double s = 0;
    for (double v : per_reward[k]) s += v;
    stats.add("reward/" + rewards_[k]->name(), s, rows);
  }
  stats.add("completion_length", length, rows);
  return stats;
}

std::map<std::string, at::Tensor> GrpoObjective::state() const {
  // After the last pass of a group the next step samples anew: nothing to keep.
  if (cache_.empty() || (micro_.step() + 1) % config_.epochs == 0) return {};
  std::map<std::string, at::Tensor> out;
  out["rollout_step"] = at::full({1}, cache_step_, at::kLong);
  for (std::size_t m = 0; m < cache_.size(); ++m) {
    const Rollout& r = cache_[m];
    const std::string p = str("rollout/", m, "/");
    out[p + "prompt_index"] = r.prompt_index;
    out[p + "ids"] = r.ids;
    out[p + "mask"] = r.mask;
    out[p + "old_logp"] = r.old_logp;
    if (r.ref_logp.defined()) out[p + "ref_logp"] = r.ref_logp;
    out[p + "advantages"] = r.advantages;
    out[p + "rewards"] = r.rewards;
    out[p + "lengths"] = r.lengths;
  }
  return out;
}

void GrpoObjective::load_state(const std::map<std::string, at::Tensor>& state) {
  cache_.clear();
  cache_step_ = -1;
  micro_.reset();
  if (state.empty()) return;
  auto need = [&](const std::string& name) -> const at::Tensor& {
    auto it = state.find(name);
    if (it == state.end()) fail("the checkpoint's objective.safetensors lacks tensor '", name, "'; the checkpoint is damaged");
    return it->second;
  };
  cache_step_ = need("rollout_step").item<std::int64_t>();
  for (std::size_t m = 0; state.count(str("rollout/", m, "/ids")); ++m) {
    const std::string p = str("rollout/", m, "/");
    Rollout r;
    r.prompt_index = need(p + "prompt_index").to(at::kLong);
    r.ids = need(p + "ids");
    r.mask = need(p + "mask");
    r.old_logp = need(p + "old_logp");
    if (config_.beta > 0) r.ref_logp = need(p + "ref_logp");
    r.advantages = need(p + "advantages");
    r.rewards = need(p + "rewards");
    r.lengths = need(p + "lengths");
    if (r.rewards.dim() != 2 || r.rewards.size(1) != static_cast<std::int64_t>(rewards_.size())) {
      fail("the checkpoint's cached rollout was scored by ", r.rewards.dim() == 2 ? r.rewards.size(1) : 0,
           " rewards; this run has ", rewards_.size());
    }
    cache_.push_back(std::move(r));
  }
  if (cache_.empty()) fail("the checkpoint's objective.safetensors holds no rollout (no 'rollout/0/ids'); the checkpoint is damaged");
}

}  // namespace dew::objectives
