#include "dew/launch/line_prefixer.h"

#include <utility>

namespace dew::launch {

LinePrefixer::LinePrefixer(std::string prefix, std::size_t max_line)
    : prefix_(std::move(prefix)), max_line_(max_line == 0 ? 1 : max_line) {}

std::string LinePrefixer::feed(std::string_view bytes) {
  std::string out;
  while (!bytes.empty()) {
    auto newline = bytes.find('\n');
    std::size_t line_end = newline == std::string_view::npos ? bytes.size() : newline;
    std::size_t room = max_line_ - partial_.size();
    if (line_end > room) {  // the line outgrows max_line: pass on a full piece
      out += prefix_ + partial_;
      out.append(bytes.substr(0, room));
      out += '\n';
      partial_.clear();
      bytes.remove_prefix(room);
      continue;
    }
    if (newline == std::string_view::npos) {
      partial_.append(bytes);
      break;
    }
    out += prefix_ + partial_;
    out.append(bytes.substr(0, newline + 1));
    partial_.clear();
    bytes.remove_prefix(newline + 1);
  }
  return out;
}

std::string LinePrefixer::finish() {
  if (partial_.empty()) return "";
  std::string out = prefix_ + partial_ + '\n';
  partial_.clear();
  return out;
}

}  // namespace dew::launch
