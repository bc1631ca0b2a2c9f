#pragma once
// Standard base64 (RFC 4648, with padding), as tokenizer.json stores SentencePiece's charsmap.
#include <string>
#include <string_view>

namespace dew::data {

// False when text holds a character outside the alphabet or has a bad length.
bool base64_decode(std::string_view text, std::string& out);

}  // namespace dew::data
