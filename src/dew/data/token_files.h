#pragma once
// A token directory, as `dew tokenize` writes it and the token loaders read it:
//
//   meta.json   tokenizer, tokenizer_source, vocab_size, dtype, train_tokens, val_tokens, eos_id, packed, documents,
//               tokenizer_sha256 (tokenizer_fingerprint.h; absent in directories written before it existed)
//   train.bin   train_tokens ids, flat little-endian unsigned integers of `dtype`
//   val.bin     val_tokens ids (the head of the token stream)
//   tokenizer files written by Tokenizer::save, so training and export use the same vocabulary
//
// docs/formats.md describes the format; this file is its one reader and writer.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dew/core/mapped_file.h"
#include "dew/data/tokenizers/tokenizer.h"

namespace dew::data {

enum class TokenDtype { uint8, uint16, uint32 };

// The smallest unsigned type that holds every id in [0, vocab_size): uint8 up to 256, uint16 up to 65536.
TokenDtype dtype_for_vocab(std::int64_t vocab_size);
std::size_t dtype_bytes(TokenDtype dtype);
const char* dtype_name(TokenDtype dtype);
// "uint8" | "uint16" | "uint32"; anything else is an error naming `source` (the meta.json path).
TokenDtype parse_dtype(const std::string& name, const std::string& source);

enum class Split { train, val };
const char* split_file_name(Split split);  // "train.bin" | "val.bin"

struct TokenMeta {
  std::string tokenizer;         // load_tokenizer spec relative to the directory: "byte" or a file name
  std::string tokenizer_source;  // what the user named (--tokenizer)
  std::int64_t vocab_size = 0;
  TokenDtype dtype = TokenDtype::uint8;
  std::int64_t train_tokens = 0;
  std::int64_t val_tokens = 0;
  std::optional<std::int64_t> eos_id;  // null when the tokenizer has none
  bool packed = false;                 // an EOS follows every document
  std::int64_t documents = 0;
  std::string tokenizer_sha256;        // the tokenizer's fingerprint; empty when meta.json predates it

  std::int64_t tokens(Split split) const { return split == Split::train ? train_tokens : val_tokens; }
};

std::string meta_to_json_text(const TokenMeta& meta);
// Reads and validates DIR/meta.json: every field present with its type, a known dtype that holds
// vocab_size, non-negative counts, eos_id inside the vocabulary. Errors name the file and the field.
TokenMeta read_token_meta(const std::filesystem::path& dir);
void write_token_meta(const std::filesystem::path& dir, const TokenMeta& meta);

// A read-only view of one split's ids, in place (memory-mapped).
class TokenArray {
 public:
  TokenArray() = default;
  TokenArray(const std::uint8_t* data, std::int64_t size, TokenDtype dtype, std::filesystem::path file)
      : data_(data), size_(size), dtype_(dtype), file_(std::move(file)) {}

  std::int64_t size() const { return size_; }
  TokenDtype dtype() const { return dtype_; }
  const std::filesystem::path& file() const { return file_; }
  const std::uint8_t* data() const { return data_; }  // size() ids of dtype(), little-endian

  std::int64_t operator[](std::int64_t i) const {
    switch (dtype_) {
      case TokenDtype::uint8: return data_[i];
      case TokenDtype::uint16: return load_le<std::uint16_t>(i);
      case TokenDtype::uint32: return load_le<std::uint32_t>(i);
    }
    return 0;
  }

  // Copies ids [start, start + count) to `out` as int64, refusing (by file, position and value) any id
  // >= vocab_size: a loader never hands the model an id its embedding does not have.
  void copy_checked(std::int64_t start, std::int64_t count, std::int64_t* out, std::int64_t vocab_size) const;

 private:
  template <class T>
  std::int64_t load_le(std::int64_t i) const {
    const std::uint8_t* p = data_ + static_cast<std::size_t>(i) * sizeof(T);
    std::uint64_t v = 0;
    for (std::size_t b = 0; b < sizeof(T); ++b) v |= static_cast<std::uint64_t>(p[b]) << (8 * b);
    return static_cast<std::int64_t>(v);
  }

  const std::uint8_t* data_ = nullptr;
  std::int64_t size_ = 0;
  TokenDtype dtype_ = TokenDtype::uint8;
  std::filesystem::path file_;
};

// Scans a whole split; the error names the file, the first bad position and its id, and the vocabulary
// size. Free for uint8 with a 256-id vocabulary (nothing can be out of range), otherwise one streaming max
// over the memory map (about 1 ms per MB; a second pass finds the position only when the max is too large).
void check_ids_in_vocab(const TokenArray& ids, std::int64_t vocab_size);

// An opened, validated token directory: meta.json plus train.bin and val.bin mapped into memory. File sizes
// must equal tokens * dtype size; the error names the file with the expected and the actual size.
class TokenFiles {
 public:
  explicit TokenFiles(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  const TokenMeta& meta() const { return meta_; }
  // One split's ids, checked against meta.json's vocab_size (check_ids_in_vocab) on each call: a loader
  // takes its split once, when it opens, so an id outside the vocabulary is refused before the first step
  // rather than when its batch comes up, and evaluation scans only val.bin.
  TokenArray split(Split split) const;

 private:
  std::filesystem::path dir_;
  TokenMeta meta_;
  MappedFile train_, val_;
};

// The tokenizer a token directory was written with (meta.json's `tokenizer`, relative to the directory).
std::unique_ptr<Tokenizer> load_token_tokenizer(const std::filesystem::path& dir, const TokenMeta& meta);
// That tokenizer's fingerprint: meta.json's tokenizer_sha256, or computed from the tokenizer when meta.json
// predates the field.
std::string token_tokenizer_sha256(const std::filesystem::path& dir, const TokenMeta& meta);

// Appends ids to a binary file as little-endian `dtype`, buffered. Ids must fit the dtype.
class TokenWriter {
 public:
  TokenWriter(const std::filesystem::path& file, TokenDtype dtype);
  ~TokenWriter();
  TokenWriter(const TokenWriter&) = delete;
  TokenWriter& operator=(const TokenWriter&) = delete;

  void write(const TokenId* ids, std::size_t count);
  void write(const std::vector<TokenId>& ids) { write(ids.data(), ids.size()); }
  // Raw bytes already in this file's dtype (used to split a stream file without decoding it).
  void write_bytes(const void* data, std::size_t bytes);
  std::int64_t tokens_written() const { return static_cast<std::int64_t>(bytes_ / dtype_bytes(dtype_)); }
  void close();  // flushes; errors name the file (is the disk full?)

 private:
  void flush_buffer();
  std::filesystem::path file_;
  TokenDtype dtype_;
  std::FILE* out_ = nullptr;
  std::vector<std::uint8_t> buffer_;
  std::size_t bytes_ = 0;
};

}  // namespace dew::data
