#pragma once
// Chat JSONL -> chat token directory (chat_token_files.h): what `dew tokenize --chat` runs and what
// `dew train sft --data X.jsonl` calls before training.
//
// Every line is read and checked first (read_chat_jsonl), so a bad line is refused by file, line and
// field before anything is written. Each conversation is rendered with the tokenizer's chat template and
// its ids carry their message's role (render_conversation). The validation split is the head: the first
// round(val_fraction * conversations) conversations, in file order. Conversations are written whole; the
// rule for ones longer than a training row belongs to the loader (PackedConversations), which counts them.
// The directory appears whole or not at all (AtomicDirectory), with the tokenizer saved inside it
// (save_pretrained_tokenizer, so the chat template travels with the data) and its tokenizer_sha256.
#include <cstdint>
#include <filesystem>
#include <string>

#include "dew/data/tokenizers/pretrained_tokenizer.h"

namespace dew::data {

struct ChatTokenizeSummary {
  std::int64_t conversations = 0;
  std::int64_t train_conversations = 0, val_conversations = 0;
  std::int64_t train_tokens = 0, val_tokens = 0;
  std::int64_t assistant_tokens = 0;  // ids with role assistant, both splits
  double seconds = 0.0;
};

// `tokenizer_source` is recorded in meta.json (what the user named). val_fraction must lie in [0, 1) and
// leave at least one training conversation. An existing `out` is replaced only if it is a token directory
// (or empty).
ChatTokenizeSummary tokenize_chat_jsonl(const std::filesystem::path& input, const PretrainedTokenizer& tokenizer,
                                        const std::filesystem::path& out, double val_fraction,
                                        const std::string& tokenizer_source, bool show_progress = false);

}  // namespace dew::data
