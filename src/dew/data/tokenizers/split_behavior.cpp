#include "dew/data/tokenizers/split_behavior.h"

#include <algorithm>

namespace dew::data {
namespace {

struct Segment {
  std::size_t start, end;
  bool match;
};

}  // namespace

void split_piece(const PrePiece& piece, const std::vector<std::pair<std::size_t, std::size_t>>& matches,
                 SplitBehavior behavior, bool invert, std::vector<PrePiece>& out) {
  std::vector<Segment> segments;
  std::size_t last = 0;
  for (auto [start, end] : matches) {
    if (start > last) segments.push_back({last, start, invert});
    segments.push_back({start, end, !invert});
    last = end;
  }
  if (last < piece.text.size()) segments.push_back({last, piece.text.size(), invert});

  std::vector<Segment> kept;  // match here means "remove"
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::Removed:
      kept = segments;
      break;
    case SplitBehavior::Isolated:
      for (Segment s : segments) kept.push_back({s.start, s.end, false});
      break;
    case SplitBehavior::Contiguous:
      for (Segment s : segments) {
        if (s.match == previous_match && !kept.empty()) kept.back().end = s.end;
        else kept.push_back({s.start, s.end, false});
        previous_match = s.match;
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      for (Segment s : segments) {
        if (s.match && !previous_match && !kept.empty()) kept.back().end = s.end;
        else kept.push_back({s.start, s.end, false});
        previous_match = s.match;
      }
      break;
    case SplitBehavior::MergedWithNext:
      for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
        if (it->match && !previous_match && !kept.empty()) kept.back().start = it->start;
        else kept.push_back({it->start, it->end, false});
        previous_match = it->match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  for (const Segment& s : kept)
    if (!s.match && s.end > s.start)
      out.push_back(PrePiece{piece.text.substr(s.start, s.end - s.start), piece.at_text_start && s.start == 0});
}

}  // namespace dew::data
