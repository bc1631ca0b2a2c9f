#pragma once
// UTF-8 bytes as ids 0-255: no vocabulary to learn, no unknown input, and no EOS id.
#include "dew/data/tokenizers/tokenizer.h"

namespace dew::data {

class ByteTokenizer final : public Tokenizer {
 public:
  std::string name() const override { return "byte"; }
  std::int64_t vocab_size() const override { return 256; }
  std::optional<TokenId> eos_id() const override { return std::nullopt; }
  std::vector<TokenId> encode(std::string_view text, bool allow_special = false) const override;
  std::string decode(std::span<const TokenId> ids) const override;
  std::string save(const std::filesystem::path& dir) const override;
  std::size_t safe_cut(std::string_view text, std::size_t from, std::size_t limit) const override;
};

}  // namespace dew::data
