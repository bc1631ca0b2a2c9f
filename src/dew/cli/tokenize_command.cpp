// `dew tokenize`: a text corpus -> a token directory (train.bin, val.bin, meta.json, tokenizer files);
// with --chat, chat JSONL ({"messages": [...]} a line) -> a chat token directory (data/chat/chat_tokenize.h).
//
// Flags, a --config file and --set overrides all fill one TokenizeConfig; precedence is defaults, then the
// config file, then the flags, then each --set in order.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dew/cli/commands.h"
#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/core/interrupt.h"
#include "dew/core/progress.h"
#include "dew/data/chat/chat_tokenize.h"
#include "dew/data/token_files.h"
#include "dew/data/tokenize.h"
#include "dew/runs/tokenizer_source.h"

namespace dew::cli {

namespace {
struct TokenizeFlags {
  std::string input, out, tokenizer, val_fraction, threads, block_bytes;
  bool pack = false;
  bool chat = false;
  std::string config_file;
  std::vector<std::string> sets;
  bool print_config = false;
};
}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto flags = std::make_shared<TokenizeFlags>();
  auto* cmd = app.add_subcommand("tokenize", "Tokenize a text file or a directory of *.txt files into train.bin, "
                                             "val.bin and meta.json for TokenWindows and PackedTokens");
  cmd->add_option("--input", flags->input, "text file (one document) or directory (every *.txt under it, sorted)");
  cmd->add_option("--out", flags->out, "output token directory (replaced whole on success)");
  cmd->add_option("--tokenizer", flags->tokenizer, "byte, gpt2, a tokenizer.json file, a .gguf model, or a directory: tokenizer files, a Hugging Face checkpoint, a run, token data");
  cmd->add_option("--val-fraction", flags->val_fraction, "fraction held out for validation, the stream's head (0.01)");
  cmd->add_flag("--pack", flags->pack, "append the EOS id after every document (needs a tokenizer with EOS)");
  cmd->add_flag("--chat", flags->chat, "--input is chat JSONL ({\"messages\": [...]} a line): render each conversation "
                "with the tokenizer's chat template and write a chat token directory with a role per id (for SFT)");
  cmd->add_option("--threads", flags->threads, "encoding threads (0 = all available)");
  cmd->add_option("--block-bytes", flags->block_bytes, "bytes read and encoded per block (bounds memory)");
  cmd->add_option("--config", flags->config_file, "JSON file with the fields below");
  cmd->add_option("--set", flags->sets, "override one field: --set val_fraction=0.05 (repeatable)");
  cmd->add_flag("--print-config", flags->print_config, "print the effective config as JSON and exit");
  cmd->footer("Config fields:\n" + config::describe<data::TokenizeConfig>());

  cmd->callback([cmd, flags] {
    exit_on_interrupt();  // Ctrl-C leaves no partial token directory
    // Each flag given becomes an override, so it is typed and checked exactly like --set.
    std::vector<std::string> overrides;
    auto given = [&](const char* flag, const char* field, const std::string& value) {
      if (cmd->count(flag) > 0) overrides.push_back(std::string(field) + "=" + value);
    };
    given("--input", "input", flags->input);
    given("--out", "out", flags->out);
    given("--tokenizer", "tokenizer", flags->tokenizer);
    given("--val-fraction", "val_fraction", flags->val_fraction);
    given("--threads", "threads", flags->threads);
    given("--block-bytes", "block_bytes", flags->block_bytes);
    if (flags->pack) overrides.push_back("pack=true");
    overrides.insert(overrides.end(), flags->sets.begin(), flags->sets.end());
    std::optional<std::filesystem::path> file;
    if (!flags->config_file.empty()) file = flags->config_file;
    auto config = config::load<data::TokenizeConfig>(file, overrides);

    if (flags->print_config) {
      std::printf("%s\n", config::to_json(config).dump(2).c_str());
      return;
    }
    // Whatever holds the tokenizer: a name, a file, a checkpoint, a .gguf model, a run or a token directory.
    if (flags->chat) {
      if (config.pack) {
        dew::fail("--pack does not apply to --chat: conversations are kept whole and packed by the SFT loader; leave it out");
      }
      data::validate_tokenize_config(config);
      const data::PretrainedTokenizer tokenizer = runs::open_tokenizer(config.tokenizer);
      data::ChatTokenizeSummary s = data::tokenize_chat_jsonl(config.input, tokenizer, config.out, config.val_fraction,
                                                              config.tokenizer, /*show_progress=*/true);
      data::TokenMeta meta = data::read_token_meta(config.out);
      std::printf("wrote %s: %lld conversations (%lld train + %lld val), %lld train + %lld val tokens, %lld assistant "
                  "tokens (%s, vocab %lld, tokenizer %s, chat) in %s\n",
                  config.out.c_str(), static_cast<long long>(s.conversations), static_cast<long long>(s.train_conversations),
                  static_cast<long long>(s.val_conversations), static_cast<long long>(s.train_tokens),
                  static_cast<long long>(s.val_tokens), static_cast<long long>(s.assistant_tokens),
                  data::dtype_name(meta.dtype), static_cast<long long>(meta.vocab_size), meta.tokenizer.c_str(),
                  human_duration(s.seconds).c_str());
      return;
    }
    const data::PretrainedTokenizer tokenizer = runs::open_tokenizer(config.tokenizer);
    data::TokenizeSummary s = data::tokenize_corpus(config, *tokenizer.tokenizer, /*show_progress=*/true);
    const double total = static_cast<double>(s.train_tokens + s.val_tokens);
    const double seconds = s.seconds > 0 ? s.seconds : 1e-9;
    data::TokenMeta meta = data::read_token_meta(config.out);
    std::printf("wrote %s: %lld documents, %lld train + %lld val tokens (%s, vocab %lld, tokenizer %s%s)\n",
                config.out.c_str(), static_cast<long long>(s.documents), static_cast<long long>(s.train_tokens),
                static_cast<long long>(s.val_tokens), data::dtype_name(meta.dtype),
                static_cast<long long>(meta.vocab_size), meta.tokenizer.c_str(), meta.packed ? ", packed" : "");
    std::printf("%s of text in %s: %.1f MB/s, %s/s, %.2f bytes per token\n", human_count(s.input_bytes, "B").c_str(),
                human_duration(s.seconds).c_str(), s.input_bytes / seconds / 1e6,
                human_count(total / seconds, "tokens").c_str(), s.input_bytes / total);
  });
}

}  // namespace dew::cli
