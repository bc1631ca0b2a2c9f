#pragma once
// Generated token ids to text bytes, one token at a time, equal to decoding the whole sequence at once.
// Decoding each token alone is wrong for tokenizers whose decode depends on the neighbours (SentencePiece
// drops the leading space of the first token; byte-fallback pieces combine), so each step decodes a short
// window ending at the new token and releases what the new token added to that window's text (the scheme of
// Hugging Face's text-generation-inference). The window starts inside the prompt, so the first generated
// token keeps a leading space the prompt's last word is followed by.
//
// The bytes it returns may end inside a multi-byte character: pass them through Utf8Holdback.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace dew::serve {

class IncrementalDetokenizer {
 public:
  using Decode = std::function<std::string(std::span<const std::int32_t>)>;
  // `context`: the last few prompt ids (any number; a handful is enough), decoded but never released.
  IncrementalDetokenizer(Decode decode, std::vector<std::int32_t> context = {});
  // The bytes `id` adds to the text.
  std::string push(std::int32_t id);

 private:
  Decode decode_;
  std::vector<std::int32_t> ids_;
  std::size_t prefix_ = 0, read_ = 0;  // window = ids_[prefix_..); ids_[prefix_..read_) already released
};

}  // namespace dew::serve
