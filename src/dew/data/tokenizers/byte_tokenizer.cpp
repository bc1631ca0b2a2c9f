#include "dew/data/tokenizers/byte_tokenizer.h"

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"

namespace dew::data {

std::vector<TokenId> ByteTokenizer::encode(std::string_view text, bool) const {
  std::vector<TokenId> ids(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(std::span<const TokenId> ids) const {
  std::string out(ids.size(), '\0');
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] > 255) fail("token id ", ids[i], " at position ", i, " is outside the byte vocabulary (0-255)");
    out[i] = static_cast<char>(ids[i]);
  }
  return out;
}

std::string ByteTokenizer::save(const std::filesystem::path& dir) const {
  write_file_atomic(dir / "tokenizer.txt", "byte\n");
  return "tokenizer.txt";
}

std::size_t ByteTokenizer::safe_cut(std::string_view text, std::size_t from, std::size_t) const {
  return std::min(from, text.size());
}

}  // namespace dew::data
