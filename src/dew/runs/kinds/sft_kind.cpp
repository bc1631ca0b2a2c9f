#include "dew/runs/kinds/sft_kind.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <system_error>

#include "dew/core/error.h"
#include "dew/data/chat/chat_records.h"
#include "dew/data/chat/chat_role.h"
#include "dew/data/chat/chat_token_files.h"
#include "dew/data/chat/chat_tokenize.h"
#include "dew/data/chat/packed_conversations.h"
#include "dew/data/prefetcher.h"
#include "dew/runs/loader_shard.h"

namespace fs = std::filesystem;

namespace dew::runs {

bool SFTTask::from_jsonl() const {
  std::error_code ec;
  return !fs::is_directory(config_.data.path, ec);
}

fs::path SFTTask::token_dir(const RunContext& run) const { return from_jsonl() ? run.dir() / "data" : fs::path(config_.data.path); }

namespace {

// The role lm.loss_role trains on, when it is one a message can have (-1 trains on every token).
std::optional<data::ChatRole> trained_message_role(std::int64_t loss_role) {
  if (loss_role < 0 || loss_role >= static_cast<std::int64_t>(data::ChatRole::template_text)) return std::nullopt;
  return static_cast<data::ChatRole>(loss_role);
}

std::string without_role_advice(data::ChatRole role) {
  return str("and SFT trains only on ", data::chat_role_name(role), " tokens (lm.loss_role = ", static_cast<int>(role),
             "), so every step would have nothing to learn. Add the ", data::chat_role_name(role),
             " messages (the answers to learn), or set lm.loss_role=-1 to train on every token (nothing was written)");
}

}  // namespace

// A file whose training conversations hold no message of the trained role would start, write the run and
// fail at step 1 ("the batch has no loss terms"); it is refused here, naming the file.
void SFTTask::refuse_without_trained_role(const std::vector<data::ChatConversation>& conversations) const {
  const auto role = trained_message_role(config_.lm.loss_role);
  if (!role) return;
  const auto total = static_cast<std::int64_t>(conversations.size());
  // The head of the file is held out for validation (data/chat/chat_tokenize.h); training reads the rest.
  const std::int64_t held_out = std::llround(config_.data.val_fraction * static_cast<double>(total));
  if (held_out >= total) return;  // none left for training: tokenize_chat_jsonl says so
  for (std::int64_t c = held_out; c < total; ++c) {
    for (const auto& message : conversations[static_cast<std::size_t>(c)].messages) {
      if (data::message_role(message.at("role").get<std::string>()) == role) return;
    }
  }
  const std::string which = held_out == 0 ? str("none of its ", total, " conversations")
                                          : str("none of its ", total - held_out, " training conversations (after the first ",
                                                held_out, ", held out for validation by data.val_fraction)");
  fail("'", config_.data.path, "': ", which, " has a message with role \"", data::chat_role_name(*role), "\", ",
       without_role_advice(*role));
}

void SFTTask::refuse_without_trained_role(const data::ChatTokenFiles& files) const {
  const auto role = trained_message_role(config_.lm.loss_role);
  if (!role) return;
  const auto roles = files.roles(data::Split::train);
  if (std::find(roles.begin(), roles.end(), static_cast<std::uint8_t>(*role)) != roles.end()) return;
  fail("'", (files.dir() / data::roles_file_name(data::Split::train)).string(), "': none of the ",
       files.offsets(data::Split::train).size() - 1, " training conversations has a token of role \"",
       data::chat_role_name(*role), "\", ", without_role_advice(*role));
}

void SFTTask::check_data(const RunContext&) {
  auto& d = config_.data;
  if (d.path.empty()) fail("data.path is not set: pass --data, a chat JSONL file or a chat token directory (dew tokenize --chat)");
  std::error_code ec;
  if (!fs::exists(d.path, ec)) fail("data.path '", d.path, "' does not exist; pass --data, a chat JSONL file or a chat token directory");
  d.path = fs::absolute(d.path).lexically_normal().string();
  if (d.seq_len <= 0) fail("data.seq_len must be positive, got ", d.seq_len);
  if (d.prefetch < 0) fail("data.prefetch must be >= 0 (0 = none), got ", d.prefetch);
  if (!(d.val_fraction >= 0 && d.val_fraction < 1)) fail("data.val_fraction must be in [0, 1), got ", d.val_fraction);
  if (config_.lm.loss_chunk_tokens < 0) fail("lm.loss_chunk_tokens must be >= 0 (0 = all at once), got ", config_.lm.loss_chunk_tokens);
  if (from_jsonl()) {
    // Every line checked now: a bad one is refused before anything is written.
    refuse_without_trained_role(data::read_chat_jsonl(d.path));
    if (config_.init.from.empty()) {
      fail("`dew train sft --data ", d.path, "` renders the conversations with a model's chat template: pass --init-from "
           "MODEL, or tokenize them first (dew tokenize --chat) and pass the token directory");
    }
    return;
  }
  if (!data::is_chat_token_directory(d.path)) {
    fail("data.path '", d.path, "' is a directory but not a chat token directory (meta.json without \"chat\": true); "
         "write one with `dew tokenize --chat --input X.jsonl --tokenizer MODEL --out DIR`, or pass the JSONL itself");
  }
  const data::ChatTokenFiles files(d.path);  // every file checked
  refuse_without_trained_role(files);
  auto& m = config_.model;
  if (m.vocab_size == 0) m.vocab_size = files.meta().tokens.vocab_size;
  if (m.vocab_size < files.meta().tokens.vocab_size) {
    fail("model.vocab_size is ", m.vocab_size, " but the data in '", d.path, "' uses a vocabulary of ",
         files.meta().tokens.vocab_size, "; set model.vocab_size to 0 (take the data's)");
  }
}

std::string SFTTask::data_tokenizer_sha256() const {
  if (from_jsonl()) return "";  // text: the run tokenizes it with its own tokenizer
  const auto meta = data::read_chat_token_meta(config_.data.path);
  return data::token_tokenizer_sha256(config_.data.path, meta.tokens);
}

std::string SFTTask::data_tokenizer_name() const {
  if (from_jsonl()) return "text";
  const auto meta = data::read_chat_token_meta(config_.data.path);
  return str("'", meta.tokens.tokenizer_source, "' (vocabulary ", meta.tokens.vocab_size, ")");
}

std::string SFTTask::copy_data_tokenizer(const fs::path& run_dir) const {
  // check_data refused JSONL without init.from; a chat token directory keeps its tokenizer with the template.
  data::save_pretrained_tokenizer(data::load_pretrained_tokenizer(config_.data.path), run_dir / "tokenizer");
  return "tokenizer";
}

void SFTTask::prepare(const RunContext& run) {
  if (!from_jsonl()) return;
  const auto summary = data::tokenize_chat_jsonl(config_.data.path, run.tokenizer(), run.dir() / "data",
                                                 config_.data.val_fraction, config_.init.from);
  notes_.push_back(str("tokenized ", summary.conversations, " conversations (", summary.train_tokens + summary.val_tokens,
                       " tokens, ", summary.assistant_tokens, " of them assistant) into '", (run.dir() / "data").string(), "'"));
}

SplitBatches SFTTask::batches(data::Split split, const RunContext& run) const {
  const fs::path dir = token_dir(run);
  const auto meta = data::read_chat_token_meta(dir);
  if (split == data::Split::val && meta.val_conversations == 0) return {};
  SplitBatches out;
  auto packed = std::make_unique<data::PackedConversations>(dir, config_.data.seq_len,
                                                            loader_options(split, config_.trainer.seed));
  const auto& c = packed->counts();
  if (c.truncated + c.dropped + c.without_assistant > 0) {
    out.notes.push_back(str(split == data::Split::train ? "training" : "validation", " conversations longer than a row of ",
                            config_.data.seq_len + 1, " ids: ", c.truncated, " truncated, ", c.dropped,
                            " dropped (no assistant token in the first row), of ", c.conversations,
                            c.without_assistant ? str("; ", c.without_assistant, " kept without an assistant token") : std::string()));
  }
  std::unique_ptr<data::BatchSource> source = std::move(packed);
  if (split == data::Split::train && config_.data.prefetch > 0) {
    const std::int64_t rows = config_.trainer.process_rows();
    source = std::make_unique<data::Prefetcher>(std::move(source), rows, static_cast<std::size_t>(config_.data.prefetch));
  }
  out.rows = std::move(source);
  return out;
}

std::string SFTTask::describe_data() const {
  return str("chat data '", config_.data.path, "' (packed rows of ", config_.data.seq_len, " tokens, loss on ",
             config_.lm.loss_role == 2 ? "assistant tokens" : config_.lm.loss_role < 0 ? "every token" : "one role", ")");
}

std::unique_ptr<RunKind> make_sft_kind() {
  return std::make_unique<DecoderKind<SFTRunConfig, SFTTask>>(
      "sft", "Supervised fine-tuning on chat conversations (loss on assistant tokens)",
      "chat JSONL ({\"messages\": [...]} per line) or a chat token directory (sets data.path)");
}

}  // namespace dew::runs
