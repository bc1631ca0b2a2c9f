// Encodes arbitrary bytes with GPT-2's tokenizer: decode(encode(x)) must be x, a safe cut must not change
// the ids, and the hand-written GPT-2 matcher must give PCRE2's pieces. Needs assets/ (compiled-in path
// or DEW_ASSETS).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "dew/data/tokenizers/bpe_tokenizer.h"
#include "dew/data/tokenizers/pretokenizer.h"

namespace {
std::vector<std::string_view> pieces(const dew::data::PreTokenizer& pre, std::string_view text) {
  std::vector<std::string_view> out;
  pre.for_each_piece(text, [&](std::string_view piece) { out.push_back(piece); });
  return out;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto tokenizer = dew::data::load_bpe_tokenizer("gpt2");
  static const dew::data::PreTokenizer fast({std::string(dew::data::kGpt2Pattern)});
  static const dew::data::PreTokenizer reference(
      {R"('(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"});
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool special : {false, true}) {
    auto ids = tokenizer->encode(text, special);
    if (tokenizer->decode(ids) != text) std::abort();
  }
  if (pieces(fast, text) != pieces(reference, text)) std::abort();
  std::size_t cut = tokenizer->safe_cut(text, size / 2, size);
  if (cut < size) {
    auto whole = tokenizer->encode(text);
    auto left = tokenizer->encode(text.substr(0, cut));
    auto right = tokenizer->encode(text.substr(cut));
    left.insert(left.end(), right.begin(), right.end());
    if (left != whole) std::abort();
  }
  return 0;
}
