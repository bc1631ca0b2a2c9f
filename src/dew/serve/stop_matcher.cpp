#include "dew/serve/stop_matcher.h"

#include <algorithm>

namespace dew::serve {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

StopMatcher::Piece StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  held_.append(text);
  // The earliest complete stop string wins (the output is cut at the first place any of them begins).
  std::size_t cut = std::string::npos;
  for (const auto& stop : stops_) cut = std::min(cut, held_.find(stop));
  if (cut != std::string::npos) {
    stopped_ = true;
    Piece piece{held_.substr(0, cut), true};
    held_.clear();
    return piece;
  }
  // Hold back the longest end of the text that is a proper prefix of some stop string. Stop strings are
  // valid UTF-8, so such an end starts at a character boundary: what is released stays valid UTF-8.
  std::size_t keep = 0;
  for (const auto& stop : stops_) {
    std::size_t longest = std::min(stop.size() - 1, held_.size());
    for (std::size_t length = longest; length > keep; --length) {
      if (std::string_view(held_).substr(held_.size() - length) == std::string_view(stop).substr(0, length)) {
        keep = length;
        break;
      }
    }
  }
  Piece piece{held_.substr(0, held_.size() - keep), false};
  held_.erase(0, held_.size() - keep);
  return piece;
}

std::string StopMatcher::flush() {
  if (stopped_) return {};
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace dew::serve
