#include "dew/objectives/lm_objective.h"

#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/objectives/router_losses.h"
#include "dew/objectives/token_cross_entropy.h"

namespace dew::objectives {

LMObjective::LMObjective(nn::CausalTransformer model, LMObjectiveConfig config)
    : model_(std::move(model)), config_(config) {
  if (config_.seq_len <= 0) dew::fail("data.seq_len must be positive, got ", config_.seq_len);
  if (config_.seq_len > model_->config().max_seq_len) {
    dew::fail("data.seq_len (", config_.seq_len, ") is larger than model.max_seq_len (", model_->config().max_seq_len,
              "); raise model.max_seq_len or lower data.seq_len");
  }
}

Loss LMObjective::compute(const data::Batch& batch) {
  const auto& text = batch.get("text");
  auto S = config_.seq_len;
  if (text.dim() != 2 || text.size(1) != S + 1) {
    dew::fail("LMObjective expects text rows of seq_len + 1 = ", S + 1, " ids, got shape ", text.sizes());
  }
  auto vocab = model_->config().vocab_size;
  {
    auto range = at::aminmax(text);
    auto lo = std::get<0>(range).item<std::int64_t>(), hi = std::get<1>(range).item<std::int64_t>();
    if (lo < 0 || hi >= vocab) {
      dew::fail("token id ", lo < 0 ? lo : hi, " in the batch is outside the model's vocabulary [0, ", vocab,
                "); the data was tokenized with a different tokenizer than the model expects");
    }
  }
  auto inputs = text.narrow(1, 0, S), targets = text.narrow(1, 1, S);
  nn::DecoderInputs in{inputs};
  auto weights = at::ones(targets.sizes(), text.options().dtype(at::kBool));
  if (batch.has("text_positions")) in.positions = batch.get("text_positions").narrow(1, 0, S);
  if (batch.has("text_segment_ids")) {
    const auto& seg = batch.get("text_segment_ids");
    in.segment_ids = seg.narrow(1, 0, S);
    auto target_seg = seg.narrow(1, 1, S);
    weights = weights & (target_seg != 0) & (target_seg == in.segment_ids);
  }
  if (config_.loss.loss_role >= 0 && batch.has("text_roles")) {
    weights = weights & (batch.get("text_roles").narrow(1, 1, S) == config_.loss.loss_role);
  }
  auto hidden = model_->hidden_states(in);
  auto E = hidden.size(-1);
  auto w = weights.reshape(-1).to(at::kFloat);
  auto sums = token_cross_entropy(hidden.reshape({-1, E}), model_->output_weight(), targets.reshape(-1), w,
                                  model_->config().final_logit_softcap, config_.loss.loss_chunk_tokens,
                                  config_.loss.token_accuracy);
  Loss out;
  out.count = w.sum().item<double>();
  out.sum = sums.loss_sum;
  out.metrics.add("ce", sums.loss_sum.detach().item<double>(), out.count);
  if (config_.loss.token_accuracy) out.metrics.add("token_accuracy", sums.correct.item<double>(), out.count);
  // A mixture of experts: its routers' losses over the input tokens that are not padding.
  add_router_losses(*model_, in.segment_ids.defined() ? (in.segment_ids != 0) : at::Tensor(), out);
  return out;
}

Loss LMObjective::loss(const data::Batch& batch, std::int64_t) { return compute(batch); }

Statistics LMObjective::evaluate(const data::Batch& batch) {
  at::NoGradGuard no_grad;
  return compute(batch).metrics;
}

nlohmann::ordered_json LMObjective::config_json() const {
  nlohmann::ordered_json out;
  out["name"] = name();
  out["lm"] = config::to_json(config_);
  out["model"] = config::to_json(model_->config());
  return out;
}

}  // namespace dew::objectives
