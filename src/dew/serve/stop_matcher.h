#pragma once
// Stop strings on generated text. The text arrives in pieces (one token's worth at a time) and a stop
// string may span pieces, so the matcher holds back the end of the text that could still become the start
// of a stop string; when one completes, the text before it is released, the stop string and everything
// after it is dropped, and the request ends (finish_reason "stop"). Streaming and non-streaming answers
// go through the same matcher, so both give the same text.
#include <string>
#include <string_view>
#include <vector>

namespace dew::serve {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  struct Piece {
    std::string text;      // safe to send now
    bool stopped = false;  // a stop string completed: nothing more comes
  };
  // Adds valid UTF-8 text (see Utf8Holdback); after a stop, further pushes return nothing.
  Piece push(std::string_view text);
  // The end of the text: what was held back (a stop string's prefix that never completed) is text after all.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace dew::serve
