#include <algorithm>

#include "dew/core/threads.h"
#include "dew/data/tokenizers/tokenizer.h"

namespace dew::data {

std::vector<TokenId> encode_parallel(const Tokenizer& tokenizer, std::string_view text, int threads,
                                     bool allow_special) {
  if (threads <= 0) threads = available_threads();
  constexpr std::size_t kMinChunk = 1 << 20;  // below this, threads cost more than they save
  if (threads == 1 || text.size() < 2 * kMinChunk) return tokenizer.encode(text, allow_special);

  // Several chunks per thread balance uneven text; each cut is one the tokenizer vouches for.
  std::size_t target = std::max(kMinChunk, text.size() / (static_cast<std::size_t>(threads) * 4));
  std::vector<std::size_t> cuts{0};
  while (cuts.back() < text.size()) {
    std::size_t from = cuts.back() + target;
    if (from >= text.size()) {
      cuts.push_back(text.size());
      break;
    }
    cuts.push_back(tokenizer.safe_cut(text, from, std::min(text.size(), from + target)));
  }
  std::vector<std::vector<TokenId>> parts(cuts.size() - 1);
  parallel_for(parts.size(), threads, [&](std::size_t i) {
    parts[i] = tokenizer.encode(text.substr(cuts[i], cuts[i + 1] - cuts[i]), allow_special);
  });
  std::size_t total = 0;
  for (const auto& p : parts) total += p.size();
  std::vector<TokenId> ids;
  ids.reserve(total);
  for (const auto& p : parts) ids.insert(ids.end(), p.begin(), p.end());
  return ids;
}

}  // namespace dew::data
