#include "dew/serve/incremental_detokenizer.h"

namespace dew::serve {

IncrementalDetokenizer::IncrementalDetokenizer(Decode decode, std::vector<std::int32_t> context)
    : decode_(std::move(decode)), ids_(std::move(context)), prefix_(0), read_(ids_.size()) {}

std::string IncrementalDetokenizer::push(std::int32_t id) {
  ids_.push_back(id);
  std::span<const std::int32_t> all(ids_);
  std::string before = decode_(all.subspan(prefix_, read_ - prefix_));
  std::string after = decode_(all.subspan(prefix_));
  // For every decoder of dew's the window's text extends the text before the new token. Were one not
  // to, releasing what goes past the old length neither repeats nor stalls the text.
  std::string added = after.size() > before.size() ? after.substr(before.size()) : std::string();
  // Slide the window: the token before the new one stays in it as context for the next.
  prefix_ = read_;
  read_ = ids_.size();
  // Keep the vector short: only ids_[prefix_..] are ever decoded again.
  if (prefix_ > 64) {
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_));
    read_ -= prefix_;
    prefix_ = 0;
  }
  return added;
}

}  // namespace dew::serve
