#pragma once
// Streams bytes out as whole UTF-8 characters. A token often ends inside a multi-byte character (a
// byte-level BPE splits emoji and CJK across tokens); sending those bytes on their own would put half a
// character into a JSON string. push() returns the longest prefix of what it has that is complete UTF-8
// and keeps the unfinished tail for the next push; bytes that can never start or continue a character
// become U+FFFD at once, so the output is always valid UTF-8.
#include <string>
#include <string_view>

namespace dew::serve {

class Utf8Holdback {
 public:
  std::string push(std::string_view bytes);
  // The end of the stream: an unfinished tail becomes U+FFFD.
  std::string flush();
  bool holding() const { return !pending_.empty(); }

 private:
  std::string pending_;
};

// `bytes` as valid UTF-8, every invalid or unfinished sequence replaced by U+FFFD.
std::string valid_utf8(std::string_view bytes);
// Code points in valid UTF-8 text (what a Python client's len() says).
std::size_t utf8_length(std::string_view text);

}  // namespace dew::serve
