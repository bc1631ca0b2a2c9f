#include "dew/runs/kinds/mdlm_kind.h"

#include <algorithm>

#include "dew/core/error.h"
#include "dew/data/token_files.h"

namespace fs = std::filesystem;

namespace dew::runs {

namespace {

// Whether a split holds `id` anywhere (a mask id inside the data's vocabulary must never occur in it).
bool split_holds(const data::TokenFiles& files, data::Split split, std::int64_t id) {
  const auto ids = files.split(split);
  for (std::int64_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == id) return true;
  }
  return false;
}

}  // namespace

// The data, and the masked model over it: the mask id resolved (mdlm.mask_id, else the model's, else one
// past the data's vocabulary), a vocabulary that holds it, bidirectional attention.
void MDLMTask::check_data(const RunContext&) {
  auto& c = config_;
  const data::TokenMeta meta = check_token_data(c.data);
  c.mdlm.validate();
  auto& m = c.model;
  const bool from_scratch = c.init.from.empty();
  std::int64_t mask = c.mdlm.mask_id;
  if (mask < 0) mask = m.mask_token_id;
  if (mask < 0) {
    if (!from_scratch && m.vocab_size > 0) {
      fail("init.from '", c.init.from, "' is not a masked-diffusion model (it has no mask token); name an id its data never "
           "uses for the mask with --set mdlm.mask_id=ID (e.g. an unused special token), or start from LLaDA/Dream");
    }
    mask = meta.vocab_size;  // the id after the data's last
  }
  if (c.mdlm.mask_id >= 0 && m.mask_token_id >= 0 && c.mdlm.mask_id != m.mask_token_id) {
    fail("mdlm.mask_id is ", c.mdlm.mask_id, " but init.from '", c.init.from, "' was trained with mask token ", m.mask_token_id,
         "; drop mdlm.mask_id (the model's is used)");
  }
  if (m.vocab_size == 0) m.vocab_size = std::max(meta.vocab_size, mask + 1);
  if (m.vocab_size < meta.vocab_size) {
    fail("model.vocab_size is ", m.vocab_size, " but the data in '", c.data.path, "' uses a vocabulary of ", meta.vocab_size,
         " (meta.json vocab_size); set model.vocab_size to 0 (the data's plus the mask token) or at least ", meta.vocab_size + 1);
  }
  if (mask >= m.vocab_size) {
    fail("the mask id ", mask, " is outside the model's vocabulary of ", m.vocab_size,
         " (model.vocab_size); set model.vocab_size to 0 (the data's plus the mask token) or at least ", mask + 1);
  }
  if (mask < meta.vocab_size) {
    const data::TokenFiles files(c.data.path);
    for (auto split : {data::Split::train, data::Split::val}) {
      if (split_holds(files, split, mask)) {
        fail("the mask id ", mask, " occurs in the ", split == data::Split::train ? "train" : "val", " split of '", c.data.path,
             "': a real token cannot mark masked positions; choose another mdlm.mask_id (an id the data never uses)");
      }
    }
  }
  c.mdlm.mask_id = mask;
  m.mask_token_id = mask;
  m.causal = false;
}

// Only masked positions go through the output head.
double MDLMTask::flops_per_token() const {
  return objectives::masked_diffusion::mdlm_flops_per_token(config_.model, seq_len(), config_.mdlm);
}

std::unique_ptr<objectives::Objective> MDLMTask::objective(nn::CausalTransformer model, const RunContext&) const {
  return std::make_unique<objectives::masked_diffusion::MaskedDiffusionObjective>(std::move(model), config_.objective_config(),
                                                                                  config_.trainer.seed);
}

SplitBatches MDLMTask::batches(data::Split split, const RunContext&) const {
  return {token_batches(config_.data, RowShift::none, split, config_.trainer), {}};
}

std::unique_ptr<RunKind> make_mdlm_kind() {
  return std::make_unique<DecoderKind<MDLMRunConfig, MDLMTask>>(
      "mdlm", "Train a masked-diffusion language model (MDLM's negative ELBO; bidirectional decoder) on a token directory",
      "token directory written by `dew tokenize` (sets data.path)");
}

}  // namespace dew::runs
