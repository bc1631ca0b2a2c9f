#pragma once
// `dew train dpo`: Direct Preference Optimization from a model (--init-from) on preference pairs
// (JSONL of prompt / chosen / rejected, TRL's standard or conversational format), against a frozen
// reference: the initial model, or dpo.reference.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dew/data/preference_rows.h"
#include "dew/objectives/dpo_loss.h"
#include "dew/runs/decoder_kind.h"
#include "dew/runs/decoder_sections.h"

#include "dew/runs/kind_defaults.h"

namespace dew::runs {

struct DpoDataConfig {
  std::string path;            // preference JSONL
  std::int64_t seq_len = 512;  // prompt + completion ids per row, at most
  double val_fraction = 0.1;   // the first pairs held out for validation

  template <class V>
  void fields(V& v) {
    v("path", path, "preference JSONL ({\"prompt\", \"chosen\", \"rejected\"} per line, strings or message lists); --data sets it");
    v("seq_len", seq_len, "prompt + completion ids per row at most; longer completions are cut at the end");
    v("val_fraction", val_fraction, "fraction of pairs (the first ones) held out for validation");
  }
};

struct DpoRunConfig : DecoderSections {
  DpoDataConfig data;
  objectives::DpoConfig dpo;
  // 256, not the LM's 1024: a DPO batch is a few hundred tokens, and one [256, vocab] fp32 block (50 MB for
  // SmolLM2) on top of the activations is what sets the peak (docs/benchmarks.md, post-training memory).
  std::int64_t loss_chunk_tokens = 256;

  DpoRunConfig() { apply_kind_defaults(*this, "dpo"); }  // configs/kinds/dpo.json


  template <class V>
  void fields(V& v) {
    visit(v, [&] {
      v("data", data);
      v("dpo", dpo);
      v("loss_chunk_tokens", loss_chunk_tokens, "compute logits this many tokens at a time (bounds memory); 0 = all");
    });
  }
  void validate_settings() const {
    DecoderSections::validate_settings();
    dpo.validate();
  }
};

class DpoTask final : public TypedDecoderTask<DpoRunConfig> {
 public:
  using TypedDecoderTask::TypedDecoderTask;
  const char* kind() const override { return "dpo"; }
  std::int64_t seq_len() const override { return config_.data.seq_len; }
  std::int64_t loss_chunk_tokens() const override { return config_.loss_chunk_tokens; }
  std::string validation_loss() const override { return "loss"; }
  std::string validation_unit() const override { return "pairs"; }
  void check_data(const RunContext& run) override;
  std::string data_tokenizer_sha256() const override { return ""; }  // text, tokenized by the run
  std::string data_tokenizer_name() const override { return "text"; }
  std::string copy_data_tokenizer(const std::filesystem::path& run_dir) const override;
  std::unique_ptr<objectives::Objective> objective(nn::CausalTransformer model, const RunContext& run) const override;
  SplitBatches batches(data::Split split, const RunContext& run) const override;
  std::string describe_data() const override;
};

std::unique_ptr<RunKind> make_dpo_kind();

}  // namespace dew::runs
