#pragma once
// Learns a byte-level BPE vocabulary from text, the way Hugging Face `tokenizers`' BpeTrainer does.
//
// The text is split into pieces with the pre-tokenizer's regex (GPT-2's by default), equal pieces are
// counted once, and the most frequent adjacent pair of symbols is merged until the vocabulary is full.
// Ids are laid out as Hugging Face lays them out: the special tokens first (in the order given), then the
// 256 single bytes in GPT-2's byte-level order (bytes whose byte-level character is printable come first,
// sorted by that character: '!'..'~', '¡'..'¬', '®'..'ÿ'; then the other 68 bytes 0x00..0x20, 0x7F..0xA0,
// 0xAD in byte order), then one id per learned merge. Ties between pairs of equal count go to the pair
// whose (left id, right id) is smallest, so a corpus always gives the same tokenizer.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dew/core/mapped_file.h"
#include "dew/data/tokenizers/bpe_tokenizer.h"
#include "dew/data/tokenizers/pretokenizer.h"

namespace dew::data {

struct BpeTrainerConfig {
  std::int64_t vocab_size = 8192;
  std::int64_t min_frequency = 2;
  std::vector<std::string> special_tokens{"<|endoftext|>"};
  std::string split_pattern{kGpt2Pattern};
  int threads = 0;
  std::int64_t max_input_bytes = 0;

  template <class V>
  void fields(V& v) {
    v("vocab_size", vocab_size, "tokens in the vocabulary: special tokens + 256 bytes + learned merges");
    v("min_frequency", min_frequency, "stop merging when the most frequent pair occurs fewer times than this");
    v("special_tokens", special_tokens, "added tokens that get the first ids, in this order");
    v("split_pattern", split_pattern, "pre-tokenizer regex (PCRE2, Unicode); GPT-2's by default");
    v("threads", threads, "threads that pre-tokenize and count the corpus (0 = all available)");
    v("max_input_bytes", max_input_bytes, "read at most this many bytes of input (0 = all)");
  }
};

// Refuses (dew::Error, naming the field and value) a vocab_size below specials + 256, empty, repeated or
// single-byte special tokens, and negative counts. learn_bpe checks too; callers check before reading input.
void check_trainer_config(const BpeTrainerConfig& config);

// Distinct pre-tokenized pieces (raw bytes) with how often each occurs, sorted by piece.
using PieceCounts = std::vector<std::pair<std::string, std::uint64_t>>;

// Splits every document with `split_pattern` on `threads` threads (0 = all) and counts equal pieces.
PieceCounts count_pieces(const std::vector<std::string_view>& documents, const std::string& split_pattern,
                         int threads = 0);

// The merge loop alone: learns merges from counted pieces. Refuses a bad config (check_trainer_config)
// and input with no text in it.
BpeParts learn_bpe(const PieceCounts& pieces, const BpeTrainerConfig& config);

// count_pieces then learn_bpe. Each document is pre-tokenized on its own.
BpeParts train_bpe(const std::vector<std::string_view>& documents, const BpeTrainerConfig& config);

// The files a training input names: the file itself, or every *.txt under a directory (recursively),
// sorted by path so the same tree always gives the same tokenizer. Errors name the path.
std::vector<std::filesystem::path> training_text_files(const std::filesystem::path& input);

// The training input as documents (one per file), memory-mapped: at most max_bytes in total when that is
// positive, the last file cut at a UTF-8 character boundary.
struct TrainingText {
  std::vector<MappedFile> files;
  std::vector<std::string_view> documents;  // views into `files`
  std::uint64_t bytes = 0;
};
TrainingText read_training_text(const std::filesystem::path& input, std::int64_t max_bytes = 0);

}  // namespace dew::data
