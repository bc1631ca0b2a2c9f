#pragma once
// Helpers for the token data tests: a tiny tokenizer with an EOS id and a merge (so cuts matter), and a
// writer of token directories with chosen ids.
#include <filesystem>
#include <string>
#include <vector>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/data/token_files.h"
#include "dew/data/tokenizers/tokenizer.h"

namespace dew::test {

// Bytes are ids 0-255, except that "th" is one id, 256; EOS is 257. Cutting between 't' and 'h' changes
// the ids, so safe_cut only cuts before a space (like GPT-2, where a space starts the next word).
class MergingTestTokenizer final : public data::Tokenizer {
 public:
  static constexpr data::TokenId kTh = 256;
  static constexpr data::TokenId kEos = 257;
  std::string name() const override { return "merging-test"; }
  std::int64_t vocab_size() const override { return 258; }
  std::optional<data::TokenId> eos_id() const override { return kEos; }
  std::vector<data::TokenId> encode(std::string_view text, bool = false) const override {
    std::vector<data::TokenId> ids;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == 't' && i + 1 < text.size() && text[i + 1] == 'h') {
        ids.push_back(kTh);
        ++i;
      } else {
        ids.push_back(static_cast<unsigned char>(text[i]));
      }
    }
    return ids;
  }
  std::string decode(std::span<const data::TokenId> ids) const override {
    std::string out;
    for (auto id : ids) {
      if (id == kTh) out += "th";
      else if (id == kEos) out += "<eos>";
      else out += static_cast<char>(id);
    }
    return out;
  }
  std::string save(const std::filesystem::path& dir) const override {
    write_file_atomic(dir / "merging-test.txt", "merging-test\n");
    return "merging-test.txt";
  }
  std::size_t safe_cut(std::string_view text, std::size_t from, std::size_t limit) const override {
    for (std::size_t p = from; p < std::min(limit, text.size()); ++p) {
      if (text[p] == ' ') return p;
    }
    return text.size();
  }
};

// Writes a token directory holding exactly these ids (val first in the stream, as dew tokenize does).
inline void write_token_dir(const std::filesystem::path& dir, const std::vector<data::TokenId>& train,
                            const std::vector<data::TokenId>& val, std::int64_t vocab_size,
                            std::optional<std::int64_t> eos_id = std::nullopt, bool packed = false) {
  std::filesystem::create_directories(dir);
  data::TokenMeta meta;
  meta.tokenizer = "byte";
  meta.tokenizer_source = "test";
  meta.vocab_size = vocab_size;
  meta.dtype = data::dtype_for_vocab(vocab_size);
  meta.train_tokens = static_cast<std::int64_t>(train.size());
  meta.val_tokens = static_cast<std::int64_t>(val.size());
  meta.eos_id = eos_id;
  meta.packed = packed;
  meta.documents = 1;
  data::TokenWriter t(dir / "train.bin", meta.dtype);
  t.write(train);
  t.close();
  data::TokenWriter v(dir / "val.bin", meta.dtype);
  v.write(val);
  v.close();
  data::write_token_meta(dir, meta);
}

inline std::vector<data::TokenId> iota_ids(std::int64_t n, std::int64_t modulo) {
  std::vector<data::TokenId> ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = static_cast<data::TokenId>(i % modulo);
  return ids;
}

}  // namespace dew::test
