#pragma once
// `dew train lm`: next-token prediction on a token directory written by `dew tokenize` (windows of the
// token stream, or whole documents packed into rows). A row of the run-kind table (run_kind.h).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "dew/objectives/lm_objective.h"
#include "dew/runs/decoder_kind.h"
#include "dew/runs/decoder_sections.h"
#include "dew/runs/token_data.h"

namespace dew::runs {

// Which token directory, and how rows are cut from it (token_data.h, shared with mdlm).
using LMDataConfig = TokenDataConfig;

// The defaults are a small decoder that trains in minutes on a laptop CPU: 4 layers of 256 features.
struct LMRunConfig : DecoderSections {
  LMDataConfig data;
  objectives::LMLossConfig lm;  // the objective's own settings; its seq_len is data.seq_len

  template <class V>
  void fields(V& v) {
    visit(v, [&] {
      v("data", data);
      v("lm", lm);
    });
  }
};

class LMTask final : public TokenLossTask<LMRunConfig> {
 public:
  using TokenLossTask::TokenLossTask;
  const char* kind() const override { return "lm"; }
  void check_data(const RunContext& run) override;
  std::string data_tokenizer_sha256() const override;
  std::string data_tokenizer_name() const override;
  std::string copy_data_tokenizer(const std::filesystem::path& run_dir) const override;
  SplitBatches batches(data::Split split, const RunContext& run) const override;
  std::string describe_data() const override;
};

std::unique_ptr<RunKind> make_lm_kind();

// Typed shortcuts for code that builds an lm run's config itself (tests, examples).
std::unique_ptr<DecoderRun> start_lm_run(const std::filesystem::path& run_dir, LMRunConfig config);
// The lm config of an opened run, read from its config by its kind (an error for another kind).
LMRunConfig lm_config(const Run& run);
// run.json's config when `run_dir` holds an lm run (what --set overrides apply to when resuming).
std::optional<LMRunConfig> stored_lm_config(const std::filesystem::path& run_dir);

}  // namespace dew::runs
