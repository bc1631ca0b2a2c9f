#include "dew/objectives/masked_diffusion/mdlm_objective.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/core/stream_seed.h"
#include "dew/nn/decoder_flops.h"
#include "dew/objectives/token_cross_entropy.h"

namespace dew::objectives::masked_diffusion {

using processes::parse_schedule;

namespace {

constexpr std::uint64_t kPurpose = 0x6d646c6d6d61736bULL;        // "mdlmmask"
constexpr std::int64_t kEvaluationStep = 0x6576616c75617465LL;  // "evaluate": not a step a run reaches

}  // namespace

std::uint64_t corruption_seed(std::uint64_t seed, std::int64_t step, std::int64_t micro) {
  return stream_seed(seed, kPurpose, step, micro);
}

void MDLMLossConfig::validate() const {
  parse_schedule(schedule, "mdlm.schedule");
  if (mask_id < -1) fail("mdlm.mask_id must be -1 (the model's or the data's vocab_size) or a token id, got ", mask_id);
  if (!(schedule_eps > 0 && schedule_eps < 1)) fail("mdlm.schedule_eps must be in (0, 1), got ", schedule_eps);
  if (!(time_eps > 0 && time_eps < 1)) fail("mdlm.time_eps must be in (0, 1), got ", time_eps);
  if (time_sampling != "antithetic" && time_sampling != "uniform") {
    fail("mdlm.time_sampling is '", time_sampling, "'; use antithetic or uniform");
  }
  if (loss_chunk_tokens < 0) fail("mdlm.loss_chunk_tokens must be >= 0 (0 = all at once), got ", loss_chunk_tokens);
}

MaskingSchedule MDLMLossConfig::masking_schedule() const {
  return MaskingSchedule(parse_schedule(schedule, "mdlm.schedule"), schedule_eps);
}

double MDLMLossConfig::expected_masked_fraction() const {
  const auto schedule = masking_schedule();
  const int points = 1000;
  double masked = 0;
  for (int i = 0; i < points; ++i) masked += 1 - schedule.alpha(time_eps + (1 - time_eps) * (i + 0.5) / points);
  return masked / points;
}

double mdlm_flops_per_token(const nn::CausalTransformerConfig& model, std::int64_t seq_len, const MDLMLossConfig& config) {
  const double head = 6.0 * static_cast<double>(model.emb_features) * static_cast<double>(model.vocab_size);
  return nn::decoder_flops_per_token(model, seq_len) - head * (1 - config.expected_masked_fraction());
}

Corruption draw_corruption(const at::Tensor& real, const MDLMLossConfig& config, std::uint64_t seed) {
  const auto B = real.size(0), S = real.size(1);
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto floats = at::TensorOptions().dtype(at::kFloat);
  auto u = at::rand({B}, generator, floats);
  // Antithetic (MDLM's _sample_t): row i's time lies in the i-th of B strata, so every batch spans the
  // whole trajectory and the 1/t weights of one batch vary less.
  auto stratified = config.time_sampling == "antithetic" ? (u + at::arange(B, floats)) / static_cast<double>(B) : u;
  auto t = (1 - config.time_eps) * stratified + config.time_eps;
  auto move_chance = 1 - config.masking_schedule().alpha(t);
  auto is_masked = (at::rand({B, S}, generator, floats) < move_chance.unsqueeze(1)) & real.to(at::kCPU);
  return {t, is_masked};
}

MaskedDiffusionObjective::MaskedDiffusionObjective(nn::CausalTransformer model, MDLMObjectiveConfig config,
                                                   std::uint64_t seed)
    : model_(std::move(model)), config_(std::move(config)), schedule_(config_.loss.masking_schedule()), seed_(seed) {
  config_.loss.validate();
  const auto& m = model_->config();
  if (m.causal) {
    fail("masked diffusion reads the whole corrupted row, so the model must attend both ways: set model.causal=false");
  }
  if (m.mask_token_id < 0 || m.mask_token_id >= m.vocab_size) {
    fail("masked diffusion needs the model's mask token: model.mask_token_id is ", m.mask_token_id, " with vocab_size ",
         m.vocab_size);
  }
  if (config_.seq_len <= 0) fail("data.seq_len must be positive, got ", config_.seq_len);
  if (config_.seq_len > m.max_seq_len) {
    fail("data.seq_len (", config_.seq_len, ") is larger than model.max_seq_len (", m.max_seq_len,
         "); raise model.max_seq_len or lower data.seq_len");
  }
}

at::Tensor MaskedDiffusionObjective::real_tokens(const data::Batch& batch) {
  const auto& text = batch.get("text");
  if (batch.has("text_segment_ids")) return batch.get("text_segment_ids") != 0;
  return at::ones(text.sizes(), text.options().dtype(at::kBool));
}

Loss MaskedDiffusionObjective::loss_under(const data::Batch& batch, const Corruption& corruption) {
  const auto& text = batch.get("text");
  const auto S = config_.seq_len;
  if (text.dim() != 2 || text.size(1) != S) {
    fail("masked diffusion expects text rows of exactly seq_len = ", S, " ids, got shape ", text.sizes());
  }
  const auto& m = model_->config();
  const std::int64_t mask_id = m.mask_token_id;
  {
    auto range = at::aminmax(text);
    auto lo = std::get<0>(range).item<std::int64_t>(), hi = std::get<1>(range).item<std::int64_t>();
    if (lo < 0 || hi >= m.vocab_size) {
      fail("token id ", lo < 0 ? lo : hi, " in the batch is outside the model's vocabulary [0, ", m.vocab_size,
           "); the data was tokenized with a different tokenizer than the model expects");
    }
  }
  const auto device = text.device();
  const auto is_masked = corruption.is_masked.to(device);
  const auto real = real_tokens(batch);
  nn::DecoderInputs in{at::where(is_masked, at::full({}, mask_id, text.options()), text)};
  if (batch.has("text_positions")) in.positions = batch.get("text_positions");
  if (batch.has("text_segment_ids")) in.segment_ids = batch.get("text_segment_ids");
  auto hidden = model_->token_prediction_states(model_->hidden_states(in));
  const auto E = hidden.size(-1);

  // Only masked positions are scored, so only their hidden states go through the head: about half the
  // head's work of scoring every position.
  const auto picked = is_masked.reshape(-1).nonzero().squeeze(1);
  const auto weight_per_row = schedule_.weight(corruption.t.to(device, at::kFloat));
  const auto weights = weight_per_row.unsqueeze(1).expand({text.size(0), S}).reshape(-1).index_select(0, picked);
  auto sums = token_cross_entropy(hidden.reshape({-1, E}).index_select(0, picked), model_->output_weight(),
                                  text.reshape(-1).index_select(0, picked), weights, m.final_logit_softcap,
                                  config_.loss.loss_chunk_tokens, config_.loss.token_accuracy, mask_id);
  const double tokens = real.sum().item<double>();
  const double masked = static_cast<double>(picked.size(0));
  Loss out;
  out.count = tokens;
  // A batch with nothing masked still touches every parameter, so the gradient is defined (and zero).
  out.sum = picked.size(0) > 0 ? sums.loss_sum : sums.loss_sum + hidden.sum() * 0;
  out.metrics.add("nelbo", sums.loss_sum.detach().item<double>(), tokens);
  out.metrics.add("masked_fraction", masked, tokens);
  if (config_.loss.token_accuracy) out.metrics.add("masked_accuracy", sums.correct.item<double>(), masked);
  return out;
}

Loss MaskedDiffusionObjective::loss(const data::Batch& batch, std::int64_t step) {
  return loss_under(batch, draw_corruption(real_tokens(batch), config_.loss, corruption_seed(seed_, step, micro_.next_stream_key(step))));
}

Statistics MaskedDiffusionObjective::evaluate(const data::Batch& batch) {
  at::NoGradGuard no_grad;
  return loss_under(batch, draw_corruption(real_tokens(batch), config_.loss, corruption_seed(seed_, kEvaluationStep, 0)))
      .metrics;
}

nlohmann::ordered_json MaskedDiffusionObjective::config_json() const {
  nlohmann::ordered_json out;
  out["name"] = name();
  out["mdlm"] = config::to_json(config_);
  out["model"] = config::to_json(model_->config());
  return out;
}

}  // namespace dew::objectives::masked_diffusion
