#pragma once
// Text corpus -> token directory (train.bin, val.bin, meta.json, tokenizer files): what `dew tokenize` runs.
//
// Input is read in blocks of `block_bytes`, cut where the tokenizer vouches that encoding the pieces apart
// equals encoding the whole (Tokenizer::safe_cut), encoded on several threads and appended to one stream
// file, so memory stays bounded by the block size whatever the corpus size. The validation split is the
// stream's head: once the total is known, the first round(val_fraction * total) tokens are copied to
// val.bin and the rest to train.bin. The directory appears whole or not at all (AtomicDirectory).
#include <cstdint>
#include <filesystem>
#include <string>

#include "dew/data/tokenizers/tokenizer.h"

namespace dew::data {

struct TokenizeConfig {
  std::string input;
  std::string out;
  std::string tokenizer = "byte";
  double val_fraction = 0.01;
  bool pack = false;
  int threads = 0;
  std::int64_t block_bytes = 16 << 20;

  template <class V>
  void fields(V& v) {
    v("input", input, "a text file (one document) or a directory: every *.txt under it, in sorted path order, one document each");
    v("out", out, "output token directory (replaced whole when the run succeeds)");
    v("tokenizer", tokenizer, "byte, gpt2, a tokenizer.json file, a .gguf model, or a directory: tokenizer files, a Hugging Face checkpoint, a run, token data");
    v("val_fraction", val_fraction, "fraction of tokens held out for validation: the head of the stream, in [0, 1)");
    v("pack", pack, "append the tokenizer's EOS id after every document (for PackedTokens)");
    v("threads", threads, "encoding threads (0 = all available)");
    v("block_bytes", block_bytes, "input read and encoded per block; bounds memory use");
  }
};

struct TokenizeSummary {
  std::int64_t documents = 0;
  std::int64_t train_tokens = 0;
  std::int64_t val_tokens = 0;
  std::uint64_t input_bytes = 0;
  double seconds = 0.0;
};

// Checks the config (paths exist, val_fraction in [0, 1), block_bytes positive); errors name the value.
void validate_tokenize_config(const TokenizeConfig& config);

// Tokenizes with the tokenizer `config.tokenizer` names.
TokenizeSummary tokenize_corpus(const TokenizeConfig& config, bool show_progress = false);
// Tokenizes with a given tokenizer (`config.tokenizer` is recorded as tokenizer_source).
TokenizeSummary tokenize_corpus(const TokenizeConfig& config, const Tokenizer& tokenizer, bool show_progress = false);

}  // namespace dew::data
