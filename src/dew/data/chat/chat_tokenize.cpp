#include "dew/data/chat/chat_tokenize.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/core/progress.h"
#include "dew/data/chat/chat_records.h"
#include "dew/data/chat/chat_render.h"
#include "dew/data/chat/chat_token_files.h"
#include "dew/data/tokenizers/tokenizer_fingerprint.h"

namespace dew::data {
namespace fs = std::filesystem;

namespace {

// As `dew tokenize`: replace an earlier output, never a user's other data, never the input itself.
void check_output_path(const fs::path& input, const fs::path& out) {
  std::error_code ec;
  const fs::path in_abs = fs::weakly_canonical(fs::absolute(input), ec);
  const fs::path out_abs = fs::weakly_canonical(fs::absolute(out), ec);
  if (in_abs == out_abs || in_abs.string().rfind(out_abs.string() + "/", 0) == 0) {
    dew::fail("--out '", out.string(), "' holds the input '", input.string(), "'; choose an output directory elsewhere");
  }
  if (!fs::exists(out, ec)) {
    check_no_file_in_the_way(out, dew::str("cannot create --out '", out.string(), "'"));
    return;
  }
  if (!fs::is_directory(out, ec)) dew::fail("--out '", out.string(), "' exists and is not a directory");
  if (!fs::is_empty(out, ec) && !fs::exists(out / "meta.json", ec)) {
    dew::fail("--out '", out.string(), "' exists and is not a token directory (no meta.json); choose another "
              "directory or remove it");
  }
}

// One split's three files.
struct SplitWriter {
  SplitWriter(const fs::path& dir, Split split, TokenDtype dtype)
      : ids(dir / split_file_name(split), dtype),
        roles(dir / roles_file_name(split), TokenDtype::uint8),
        offsets_file(dir / offsets_file_name(split)) {}

  void add(const RoleTokens& conversation) {
    offsets.push_back(ids.tokens_written());
    ids.write(conversation.ids);
    roles.write_bytes(conversation.roles.data(), conversation.roles.size());
  }

  void close() {
    ids.close();
    roles.close();
    offsets.push_back(ids.tokens_written());
    std::vector<std::uint8_t> bytes;
    bytes.reserve(offsets.size() * 8);
    for (std::int64_t v : offsets)
      for (int b = 0; b < 8; ++b) bytes.push_back(static_cast<std::uint8_t>(static_cast<std::uint64_t>(v) >> (8 * b)));
    TokenWriter out(offsets_file, TokenDtype::uint8);
    out.write_bytes(bytes.data(), bytes.size());
    out.close();
  }

  TokenWriter ids, roles;
  fs::path offsets_file;
  std::vector<std::int64_t> offsets;
};

}  // namespace

ChatTokenizeSummary tokenize_chat_jsonl(const fs::path& input, const PretrainedTokenizer& tokenizer, const fs::path& out,
                                        double val_fraction, const std::string& tokenizer_source, bool show_progress) {
  const auto start = std::chrono::steady_clock::now();
  if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
    dew::fail("val_fraction ", val_fraction, " is outside [0, 1); use for example 0.01 (the first 1% of conversations)");
  }
  if (!tokenizer.chat_template) {
    dew::fail("tokenizer '", tokenizer_source, "' has no chat template, which chat data is rendered with; name a "
              "checkpoint, a .gguf model or a tokenizer directory whose tokenizer_config.json has one");
  }
  std::error_code ec;
  if (!fs::exists(input, ec)) dew::fail("input '", input.string(), "' does not exist");
  check_output_path(input, out);
  const std::vector<ChatConversation> conversations = read_chat_jsonl(input);  // every line checked first

  ChatTokenizeSummary summary;
  summary.conversations = static_cast<std::int64_t>(conversations.size());
  summary.val_conversations = std::llround(val_fraction * static_cast<double>(summary.conversations));
  summary.train_conversations = summary.conversations - summary.val_conversations;
  if (summary.train_conversations == 0) {
    dew::fail("val_fraction ", val_fraction, " of ", summary.conversations, " conversations leaves none for training; lower it");
  }

  const TokenDtype dtype = dtype_for_vocab(tokenizer.tokenizer->vocab_size());
  const fs::path named = out.filename().empty() ? out.parent_path() : out;
  remove_stale_temporaries(named.parent_path().empty() ? fs::path(".") : named.parent_path(), named.filename().string());
  AtomicDirectory directory(out);  // removed unless committed below
  {
    SplitWriter val(directory.path(), Split::val, dtype), train(directory.path(), Split::train, dtype);
    std::unique_ptr<Progress> progress;
    if (show_progress) progress = std::make_unique<Progress>("tokenize", conversations.size(), "conversations");
    for (std::size_t c = 0; c < conversations.size(); ++c) {
      RoleTokens tokens;
      try {
        tokens = render_conversation(tokenizer, conversations[c].messages);
      } catch (const Error& e) {
        dew::fail(input.string(), ":", conversations[c].line, ": cannot render the conversation: ", e.what());
      }
      for (std::uint8_t r : tokens.roles) summary.assistant_tokens += r == static_cast<std::uint8_t>(ChatRole::assistant);
      (static_cast<std::int64_t>(c) < summary.val_conversations ? val : train).add(tokens);
      if (progress) progress->advance(1);
    }
    val.close();
    train.close();
    if (progress) progress->finish();
    summary.val_tokens = val.ids.tokens_written();
    summary.train_tokens = train.ids.tokens_written();
  }

  save_pretrained_tokenizer(tokenizer, directory.path());
  if (!fs::exists(directory.path() / "tokenizer.json", ec)) {
    dew::fail("tokenizer '", tokenizer_source, "' cannot be saved as tokenizer.json (a byte tokenizer?); chat data "
              "needs a BPE tokenizer with a chat template");
  }
  ChatTokenMeta meta;
  meta.tokens.tokenizer = "tokenizer.json";
  meta.tokens.tokenizer_source = tokenizer_source;
  meta.tokens.vocab_size = tokenizer.tokenizer->vocab_size();
  meta.tokens.dtype = dtype;
  meta.tokens.train_tokens = summary.train_tokens;
  meta.tokens.val_tokens = summary.val_tokens;
  if (tokenizer.eos_id) meta.tokens.eos_id = *tokenizer.eos_id;
  meta.tokens.packed = false;  // end-of-turn ids repeat inside conversations; the offsets files mark them
  meta.tokens.documents = summary.conversations;
  meta.tokens.tokenizer_sha256 = tokenizer_sha256(*tokenizer.tokenizer);
  meta.train_conversations = summary.train_conversations;
  meta.val_conversations = summary.val_conversations;
  write_chat_token_meta(directory.path(), meta);
  directory.commit();
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace dew::data
