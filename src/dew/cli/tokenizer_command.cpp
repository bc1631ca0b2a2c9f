// `dew tokenizer train|encode|decode`: learn a byte-level BPE tokenizer from text, and try one out.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dew/cli/commands.h"
#include "dew/core/atomic_file.h"
#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/core/interrupt.h"
#include "dew/core/progress.h"
#include "dew/data/tokenizers/bpe_trainer.h"
#include "dew/data/tokenizers/pipeline_tokenizer.h"
#include "dew/data/tokenizers/tokenizer.h"
#include "dew/runs/tokenizer_source.h"

namespace dew::cli {
namespace {
namespace fs = std::filesystem;

struct TrainOptions {
  std::string input, out;
  std::optional<std::int64_t> vocab_size, min_frequency, max_input_bytes;
  std::optional<int> threads;
  std::vector<std::string> special_tokens;
  std::optional<std::string> config_file;
  std::vector<std::string> sets;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void run_train(const TrainOptions& options) {
  exit_on_interrupt();  // Ctrl-C leaves no partial tokenizer files
  // The flags are shorthands for --set; explicit --set entries come after them and win.
  std::vector<std::string> sets;
  if (options.vocab_size) sets.push_back(dew::str("vocab_size=", *options.vocab_size));
  if (options.min_frequency) sets.push_back(dew::str("min_frequency=", *options.min_frequency));
  if (options.max_input_bytes) sets.push_back(dew::str("max_input_bytes=", *options.max_input_bytes));
  if (options.threads) sets.push_back(dew::str("threads=", *options.threads));
  if (!options.special_tokens.empty())
    sets.push_back("special_tokens=" + nlohmann::json(options.special_tokens).dump());
  sets.insert(sets.end(), options.sets.begin(), options.sets.end());
  std::optional<fs::path> config_file;
  if (options.config_file) config_file = *options.config_file;
  auto config = config::load<data::BpeTrainerConfig>(config_file, sets);
  data::check_trainer_config(config);  // before reading what may be gigabytes of text
  {
    // --out too: training can take minutes, and a file in the way would otherwise be found only after it.
    std::error_code ec;
    const fs::path out(options.out);
    if (fs::exists(out, ec) && !fs::is_directory(out, ec)) {
      fail("--out '", options.out, "' exists and is not a directory; give a directory (created if missing) for tokenizer.json");
    }
    check_no_file_in_the_way(out, str("cannot create --out '", options.out, "'"));
  }

  auto start = std::chrono::steady_clock::now();
  auto text = data::read_training_text(options.input, config.max_input_bytes);
  data::PieceCounts pieces = data::count_pieces(text.documents, config.split_pattern, config.threads);
  double counting = seconds_since(start);
  std::printf("read %s from %zu file(s) under '%s'; %zu distinct pieces (%.2f s)\n",
              human_count(static_cast<double>(text.bytes), "B").c_str(), text.files.size(), options.input.c_str(),
              pieces.size(), counting);
  std::fflush(stdout);

  auto merge_start = std::chrono::steady_clock::now();
  data::BpeParts parts;
  try {
    parts = data::learn_bpe(pieces, config);
  } catch (const Error& e) {
    fail("cannot train on '", options.input, "': ", e.what());
  }
  double merging = seconds_since(merge_start);
  std::size_t vocab = parts.vocab.size(), merges = parts.merges.size();
  if (static_cast<std::int64_t>(vocab) < config.vocab_size)
    std::printf("stopped at %zu tokens, below vocab_size %lld: no pair left occurs at least min_frequency (%lld) times\n", vocab,
                static_cast<long long>(config.vocab_size), static_cast<long long>(config.min_frequency));
  std::printf("learned %zu merges, vocabulary %zu (%.2f s)\n", merges, vocab, merging);

  fs::path out(options.out);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) fail("cannot create output directory '", options.out, "': ", ec.message());
  data::BpeTokenizer tokenizer(std::move(parts), (out / "tokenizer.json").string());
  std::string written = tokenizer.save(out);
  std::printf("wrote %s (%.2f s in all)\n", (out / written).c_str(), seconds_since(start));
}

void add_train(CLI::App& parent) {
  auto options = std::make_shared<TrainOptions>();
  auto* cmd = parent.add_subcommand("train", "Learn a byte-level BPE tokenizer from text and write DIR/tokenizer.json");
  cmd->add_option("--input", options->input, "text file, or directory whose *.txt files (recursively, sorted) are read")
      ->required();
  cmd->add_option("--out", options->out, "output directory for tokenizer.json (created if missing)")->required();
  cmd->add_option("--vocab-size", options->vocab_size, "tokens in all: special tokens + 256 bytes + merges (8192)");
  cmd->add_option("--min-frequency", options->min_frequency, "stop when the best pair occurs fewer times (2)");
  cmd->add_option("--special-token", options->special_tokens,
                  "special token, repeatable; replaces the default <|endoftext|>");
  cmd->add_option("--threads", options->threads, "threads that pre-tokenize and count (0 = all)");
  cmd->add_option("--max-input-bytes", options->max_input_bytes, "read at most this many bytes (0 = all)");
  cmd->add_option("--config", options->config_file, "JSON file with trainer settings");
  cmd->add_option("--set", options->sets, "override a setting: key=value (repeatable)");
  cmd->footer("Settings (--config / --set):\n" + config::describe<data::BpeTrainerConfig>());
  cmd->callback([options] { run_train(*options); });
}

void add_encode(CLI::App& parent) {
  struct Options {
    std::string tokenizer, text;
    bool allow_special = false, add_special_tokens = false;
  };
  auto options = std::make_shared<Options>();
  auto* cmd = parent.add_subcommand("encode", "Print the ids of a text, space-separated");
  cmd->add_option("--tokenizer", options->tokenizer, "byte, gpt2, a tokenizer.json, a .gguf file, or a directory (tokenizer files, a run, token data)")->required();
  cmd->add_option("--text", options->text, "the text to encode")->required();
  cmd->add_flag("--allow-special", options->allow_special, "encode special tokens written in the text as their ids");
  cmd->add_flag("--add-special-tokens", options->add_special_tokens,
                "add the tokens a tokenizer.json post-processor (or GGUF add_bos/add_eos) puts around the text");
  cmd->callback([options] {
    auto tokenizer = runs::open_tokenizer(options->tokenizer).tokenizer;
    std::vector<data::TokenId> ids = tokenizer->encode(options->text, options->allow_special);
    if (options->add_special_tokens)
      if (const auto* pipeline = dynamic_cast<const data::PipelineTokenizer*>(tokenizer.get()))
        ids = pipeline->add_special_tokens(std::move(ids));
    std::string line;
    for (auto id : ids) {
      if (!line.empty()) line += ' ';
      line += std::to_string(id);
    }
    std::printf("%s\n", line.c_str());
  });
}

void add_decode(CLI::App& parent) {
  struct Options {
    std::string tokenizer;
    std::vector<data::TokenId> ids;
  };
  auto options = std::make_shared<Options>();
  auto* cmd = parent.add_subcommand("decode", "Print the text of ids (its raw bytes, then a newline)");
  cmd->add_option("--tokenizer", options->tokenizer, "byte, gpt2, a tokenizer.json, a .gguf file, or a directory (tokenizer files, a run, token data)")->required();
  cmd->add_option("ids", options->ids, "token ids")->required();
  cmd->callback([options] {
    auto tokenizer = runs::open_tokenizer(options->tokenizer).tokenizer;
    std::string text = tokenizer->decode(options->ids);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  });
}

}  // namespace

void add_tokenizer_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenizer", "Train a byte-level BPE tokenizer, or encode and decode with one");
  cmd->require_subcommand(1);
  add_train(*cmd);
  add_encode(*cmd);
  add_decode(*cmd);
}

}  // namespace dew::cli
