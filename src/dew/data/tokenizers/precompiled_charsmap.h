#pragma once
// SentencePiece's precompiled normalization rules ("precompiled_charsmap": base64 in tokenizer.json, raw bytes
// in GGUF's tokenizer.ggml.precompiled_charsmap). Layout: a little-endian uint32 byte size of the trie, the
// trie as a Darts-clone double array of uint32 units, then the replacement strings, each ending in NUL.
// A key's value is the offset of its replacement in that string blob.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dew::data {

class PrecompiledCharsmap {
 public:
  // Errors name `where` and what is wrong with the blob (too short, a trie size past its end).
  PrecompiledCharsmap(std::string_view blob, const std::string& where);

  // The replacement of the shortest key that is a prefix of `chunk`, as Hugging Face's Precompiled uses it.
  std::optional<std::string_view> transform(std::string_view chunk) const;

  // Hugging Face's rule: each grapheme cluster shorter than 6 bytes is looked up whole; otherwise (or when
  // it has no rule) each of its characters is looked up; characters without a rule stay.
  std::string normalize(std::string_view text) const;

 private:
  std::vector<std::uint32_t> units_;
  std::string strings_;
};

}  // namespace dew::data
