#pragma once
// The tokenizer interface every part of dew uses: data preparation, training, generation and export.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dew::data {

using TokenId = std::int32_t;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Short name for messages and meta.json: "byte", "gpt2", or the file it was loaded from.
  virtual std::string name() const = 0;
  // One past the largest id, added and special tokens included.
  virtual std::int64_t vocab_size() const = 0;
  virtual std::optional<TokenId> eos_id() const = 0;

  // Text to ids. Special tokens written in the text (like "<|endoftext|>") become their ids only when
  // allow_special is true; by default they are encoded as ordinary text, so a corpus cannot inject them.
  virtual std::vector<TokenId> encode(std::string_view text, bool allow_special = false) const = 0;

  // Ids to bytes: decode(encode(x)) == x for any byte string, invalid UTF-8 included. An id outside the
  // vocabulary is an error that names it.
  virtual std::string decode(std::span<const TokenId> ids) const = 0;

  // Writes the files that load_tokenizer(dir) reads back as the same tokenizer. Returns the file name
  // written (for meta.json), e.g. "tokenizer.json".
  virtual std::string save(const std::filesystem::path& dir) const = 0;

  // A cut position at or after `from` (and before text.size()) where encoding text[..cut] and text[cut..]
  // separately gives the same ids as encoding the whole, or text.size() if none is found before `limit`.
  // Lets large inputs be encoded in parallel chunks with identical results.
  virtual std::size_t safe_cut(std::string_view text, std::size_t from, std::size_t limit) const = 0;
};

// "byte"; "gpt2" (GPT-2's vocabulary, shipped in assets/); a tokenizer.json file; or a directory holding
// tokenizer.json, or GPT-2-style encoder.json + vocab.bpe. Errors name the path and what is wrong.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec);

// Encodes large text on several threads (0 = all available) with exactly the ids of encode().
std::vector<TokenId> encode_parallel(const Tokenizer& tokenizer, std::string_view text, int threads = 0,
                                     bool allow_special = false);

// Where bundled assets live: $DEW_ASSETS, else the source tree's assets/ (set at build time).
std::filesystem::path asset_dir();

}  // namespace dew::data
