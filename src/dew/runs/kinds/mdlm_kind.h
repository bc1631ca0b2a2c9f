#pragma once
// `dew train mdlm`: a masked-diffusion language model (MDLM) on a token directory written by `dew tokenize`,
// from scratch or from a published masked-diffusion checkpoint (LLaDA, Dream: --init-from). Rows hold exactly
// data.seq_len ids (no next-token shift); the model is the decoder with model.causal = false and a mask
// token: from scratch, the id after the data's last (model.vocab_size = the data's + 1). A row of the
// run-kind table (run_kind.h).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "dew/objectives/masked_diffusion/mdlm_objective.h"
#include "dew/runs/decoder_kind.h"
#include "dew/runs/decoder_sections.h"
#include "dew/runs/token_data.h"

#include "dew/runs/kind_defaults.h"

namespace dew::runs {

// The lm's decoder made bidirectional. model.mask_token_id is resolved by check_data (and model.causal set
// again: a run from init.from adopts the model's config, an autoregressive one's included).
struct MDLMRunConfig : DecoderSections {
  MDLMRunConfig() { apply_kind_defaults(*this, "mdlm"); }  // configs/kinds/mdlm.json

  TokenDataConfig data;
  objectives::masked_diffusion::MDLMLossConfig mdlm;

  template <class V>
  void fields(V& v) {
    visit(v, [&] {
      v("data", data);
      v("mdlm", mdlm);
    });
  }

  objectives::masked_diffusion::MDLMObjectiveConfig objective_config() const { return {.seq_len = data.seq_len, .loss = mdlm}; }
  void validate_settings() const {
    DecoderSections::validate_settings();
    mdlm.validate();
  }
};

class MDLMTask final : public TypedDecoderTask<MDLMRunConfig> {
 public:
  using TypedDecoderTask::TypedDecoderTask;
  const char* kind() const override { return "mdlm"; }
  std::int64_t seq_len() const override { return config_.data.seq_len; }
  std::int64_t loss_chunk_tokens() const override { return config_.mdlm.loss_chunk_tokens; }
  std::string validation_loss() const override { return "nelbo"; }
  double flops_per_token() const override;
  bool masked_diffusion() const override { return true; }
  void check_data(const RunContext& run) override;
  std::string data_tokenizer_sha256() const override { return token_data_tokenizer_sha256(config_.data); }
  std::string data_tokenizer_name() const override { return token_data_tokenizer_name(config_.data); }
  std::string copy_data_tokenizer(const std::filesystem::path& run_dir) const override {
    return copy_token_data_tokenizer(config_.data, run_dir);
  }
  std::unique_ptr<objectives::Objective> objective(nn::CausalTransformer model, const RunContext& run) const override;
  SplitBatches batches(data::Split split, const RunContext& run) const override;
  std::string describe_data() const override { return describe_token_data(config_.data); }
};

std::unique_ptr<RunKind> make_mdlm_kind();

}  // namespace dew::runs
