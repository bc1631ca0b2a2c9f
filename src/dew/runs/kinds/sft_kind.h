#pragma once
// `dew train sft`: supervised fine-tuning on chat data. The LM objective over whole conversations packed
// into rows (data/chat/packed_conversations.h), trained only on assistant tokens by default (lm.loss_role,
// the spec's loss_role=Role.ASSISTANT). --data takes a chat JSONL file, which the run tokenizes with its
// model's chat template into RUN/data when it starts (and keeps: a resumed run reads that copy), or a chat
// token directory written by `dew tokenize --chat`.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dew/data/chat/chat_records.h"
#include "dew/data/chat/chat_token_files.h"
#include "dew/objectives/lm_objective.h"
#include "dew/runs/decoder_kind.h"
#include "dew/runs/decoder_sections.h"

#include "dew/runs/kind_defaults.h"

namespace dew::runs {

struct SFTDataConfig {
  std::string path;             // chat JSONL, or a chat token directory
  std::int64_t seq_len = 512;   // tokens the model reads per row
  double val_fraction = 0.05;   // JSONL only: the first conversations held out for validation
  std::int64_t prefetch = 4;

  template <class V>
  void fields(V& v) {
    v("path", path, "chat JSONL ({\"messages\": [...]} per line) or a chat token directory (dew tokenize --chat); --data sets it");
    v("seq_len", seq_len, "tokens the model reads per row; longer conversations are truncated or dropped (see docs)");
    v("val_fraction", val_fraction, "JSONL only: fraction of conversations (the first ones) held out for validation");
    v("prefetch", prefetch, "batches prepared ahead on a background thread; 0 = none");
  }
};

struct SFTRunConfig : DecoderSections {
  SFTDataConfig data;
  objectives::LMLossConfig lm;

  // Fine-tuning defaults (configs/kinds/sft.json): loss on assistant tokens, a learning rate for a
  // pretrained model, logits 256 tokens at a time.
  SFTRunConfig() { apply_kind_defaults(*this, "sft"); }

  template <class V>
  void fields(V& v) {
    visit(v, [&] {
      v("data", data);
      v("lm", lm);
    });
  }
};

class SFTTask final : public TokenLossTask<SFTRunConfig> {
 public:
  using TokenLossTask::TokenLossTask;
  const char* kind() const override { return "sft"; }
  void check_data(const RunContext& run) override;
  std::string data_tokenizer_sha256() const override;
  std::string data_tokenizer_name() const override;
  std::string copy_data_tokenizer(const std::filesystem::path& run_dir) const override;
  void prepare(const RunContext& run) override;
  SplitBatches batches(data::Split split, const RunContext& run) const override;
  std::string describe_data() const override;
  std::vector<std::string> notes() const override { return notes_; }

 private:
  bool from_jsonl() const;
  // Refuses data whose training conversations have no message (no token) of lm.loss_role's role.
  void refuse_without_trained_role(const std::vector<data::ChatConversation>& conversations) const;
  void refuse_without_trained_role(const data::ChatTokenFiles& files) const;
  // The chat token directory the run reads: RUN/data for JSONL, else data.path.
  std::filesystem::path token_dir(const RunContext& run) const;
  std::vector<std::string> notes_;  // from prepare()
};

std::unique_ptr<RunKind> make_sft_kind();

}  // namespace dew::runs
