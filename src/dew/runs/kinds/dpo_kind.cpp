#include "dew/runs/kinds/dpo_kind.h"

#include <cmath>
#include <system_error>

#include "dew/core/error.h"
#include "dew/data/chat/chat_records.h"
#include "dew/data/chat/chat_render.h"
#include "dew/data/tokenizers/tokenizer_fingerprint.h"
#include "dew/nn/dtype.h"
#include "dew/nn/lora.h"
#include "dew/objectives/dpo_objective.h"
#include "dew/runs/data_file.h"
#include "dew/runs/loader_shard.h"
#include "dew/runs/model_source.h"

namespace fs = std::filesystem;

namespace dew::runs {

namespace {
// The first round(val_fraction * n) pairs are the validation split, the rest train.
std::int64_t validation_pairs(std::int64_t n, double val_fraction) {
  return static_cast<std::int64_t>(std::llround(val_fraction * static_cast<double>(n)));
}
}  // namespace

void DpoTask::check_data(const RunContext&) {
  auto& d = config_.data;
  require_data_file(d.path, "PAIRS.jsonl", " ({\"prompt\", \"chosen\", \"rejected\"} per line)");
  if (d.seq_len < 2) fail("data.seq_len must be at least 2 (a prompt id and a completion id), got ", d.seq_len);
  if (!(d.val_fraction >= 0 && d.val_fraction < 1)) fail("data.val_fraction must be in [0, 1), got ", d.val_fraction);
  if (config_.loss_chunk_tokens < 0) fail("loss_chunk_tokens must be >= 0 (0 = all at once), got ", config_.loss_chunk_tokens);
  config_.dpo.validate();
  const auto pairs = data::read_preference_jsonl(d.path);  // every line checked before anything is written
  const std::int64_t n = static_cast<std::int64_t>(pairs.size());
  if (n - validation_pairs(n, d.val_fraction) < 1) {
    fail("'", d.path, "' has ", n, " preference pairs, none left for training with data.val_fraction = ", d.val_fraction);
  }
  if (!config_.dpo.reference.empty()) config_.dpo.reference = fs::absolute(config_.dpo.reference).lexically_normal().string();
}

std::string DpoTask::copy_data_tokenizer(const fs::path&) const {
  fail("`dew train dpo` post-trains a model: pass --init-from MODEL (its tokenizer reads the pairs)");
}

std::unique_ptr<objectives::Objective> DpoTask::objective(nn::CausalTransformer model, const RunContext& run) const {
  if (config_.lora.enabled() && config_.dpo.reference.empty() && nn::has_lora(*model)) {
    // The adapters start at zero, so the base they sit on is the initial model: the reference, with no copy.
    return std::make_unique<objectives::DpoObjective>(std::move(model), nullptr, config_.dpo, config_.loss_chunk_tokens);
  }
  const std::string reference_path = config_.dpo.reference.empty() ? config_.init.from : config_.dpo.reference;
  // init.from as the run resolved it once; another reference is resolved here.
  const ModelSource source = config_.dpo.reference.empty() ? run.init_source() : resolve_model_source(reference_path);
  LoadedModel reference = load_model_source(source, {.device = "cpu"});
  const auto& a = model->config();
  const auto& b = reference.model->config();
  if (b.vocab_size != a.vocab_size || b.emb_features != a.emb_features) {
    fail("dpo.reference '", reference_path, "' is another architecture (vocabulary ", b.vocab_size, ", ", b.emb_features,
         " features) than the policy (", a.vocab_size, ", ", a.emb_features, "); the reference must share the policy's tokenizer");
  }
  if (data::tokenizer_sha256(*reference.tokenizer.tokenizer) != data::tokenizer_sha256(*run.tokenizer().tokenizer)) {
    fail("dpo.reference '", reference_path, "' uses another tokenizer than the run; its log-probabilities would score other tokens");
  }
  reference.model->to(nn::parse_dtype(config_.model.param_dtype));
  return std::make_unique<objectives::DpoObjective>(std::move(model), reference.model, config_.dpo, config_.loss_chunk_tokens);
}

SplitBatches DpoTask::batches(data::Split split, const RunContext& run) const {
  const auto& d = config_.data;
  auto records = data::read_preference_jsonl(d.path);
  const std::int64_t n = static_cast<std::int64_t>(records.size()), val = validation_pairs(n, d.val_fraction);
  const std::int64_t begin = split == data::Split::val ? 0 : val, end = split == data::Split::val ? val : n;
  if (begin == end) return {};
  std::vector<data::PreferenceIds> pairs;
  for (std::int64_t i = begin; i < end; ++i) {
    auto tokens = data::encode_preference_pair(run.tokenizer(), records[static_cast<std::size_t>(i)]);
    pairs.push_back({std::move(tokens.prompt), std::move(tokens.chosen), std::move(tokens.rejected)});
  }
  const char* name = split == data::Split::val ? "validation" : "training";
  auto rows = std::make_unique<data::PreferenceRows>(std::move(pairs), d.seq_len,
                                                     loader_options(split, config_.trainer.seed),
                                                     str("'", d.path, "' (", name, " pairs)"));
  const auto& c = rows->counts();
  SplitBatches out;
  if (c.truncated + c.dropped > 0) {
    out.notes.push_back(str(name, " pairs longer than data.seq_len = ", d.seq_len, " ids: ", c.truncated,
                            " with completions cut at the end, ", c.dropped, " dropped (prompt too long), of ", c.pairs));
  }
  out.rows = std::move(rows);
  return out;
}

std::string DpoTask::describe_data() const {
  return str("preference pairs '", config_.data.path, "' (rows of at most ", config_.data.seq_len, " ids, ",
             config_.dpo.loss, " loss, beta ", config_.dpo.beta, ")");
}

std::unique_ptr<RunKind> make_dpo_kind() {
  return std::make_unique<DecoderKind<DpoRunConfig, DpoTask>>(
      "dpo", "Direct Preference Optimization on preference pairs, against a frozen reference",
      "preference JSONL: {\"prompt\", \"chosen\", \"rejected\"} per line (sets data.path)", /*needs_init_from=*/true);
}

}  // namespace dew::runs
