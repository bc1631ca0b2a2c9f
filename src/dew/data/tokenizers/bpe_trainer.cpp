// The BPE merge loop: counts every adjacent pair once, then keeps the counts current as merges happen.
//
// Each merge touches only the words that hold the merged pair (a per-pair list of word indices), and the
// most frequent pair is found with a max-heap whose stale entries are fixed when they surface: a pair's
// count only ever falls after it first appears (new pairs always contain the newest token), so an entry
// whose stored count differs from the live count is re-pushed with the live one and the first entry that
// agrees is the true maximum. This is Hugging Face's BpeTrainer algorithm; the cost per merge is the
// length of the words it touches, not the size of the corpus.
#include "dew/data/tokenizers/bpe_trainer.h"

#include <algorithm>
#include <array>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "dew/core/error.h"

namespace dew::data {
namespace {

using Symbol = std::uint32_t;
using PairKey = std::uint64_t;

PairKey pair_key(Symbol left, Symbol right) { return (static_cast<PairKey>(left) << 32) | right; }
Symbol left_of(PairKey key) { return static_cast<Symbol>(key >> 32); }
Symbol right_of(PairKey key) { return static_cast<Symbol>(key & 0xffffffffu); }

// GPT-2's bytes_to_unicode maps these bytes to themselves; the other 68 to U+0100.. in byte order.
bool byte_level_keeps(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

// The 256 bytes sorted by their byte-level character, which is how Hugging Face orders the alphabet.
std::array<std::uint8_t, 256> byte_level_order() {
  std::array<std::uint8_t, 256> order{};
  int n = 0;
  for (int b = 0; b < 256; ++b)
    if (byte_level_keeps(b)) order[n++] = static_cast<std::uint8_t>(b);
  for (int b = 0; b < 256; ++b)
    if (!byte_level_keeps(b)) order[n++] = static_cast<std::uint8_t>(b);
  return order;
}

// Code points of `text`, or false when it is not valid UTF-8.
bool decode_utf8(std::string_view text, std::vector<std::uint32_t>& out) {
  for (std::size_t i = 0; i < text.size();) {
    auto c = static_cast<std::uint8_t>(text[i]);
    int extra = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (extra < 0 || i + extra >= text.size()) return false;
    std::uint32_t cp = extra == 0 ? c : c & (0x3F >> extra);
    for (int k = 1; k <= extra; ++k) {
      auto cont = static_cast<std::uint8_t>(text[i + k]);
      if ((cont & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cont & 0x3F);
    }
    out.push_back(cp);
    i += extra + 1;
  }
  return true;
}

// Hugging Face keys its vocabulary by the byte-level spelling of learned tokens and by the plain text of
// special tokens, so a special token spelled in byte-level symbols other than printable ASCII ("ĠĠ",
// "Ā") would clash with a learned token under a different id. Such tokens are refused; printable-ASCII
// ones ("<|endoftext|>") spell the same in both forms and are fine.
void check_special_tokens(const std::vector<std::string>& specials) {
  std::set<std::string> seen;
  for (const auto& token : specials) {
    if (token.empty()) fail("special_tokens: an empty special token is not allowed; remove it");
    if (!seen.insert(token).second) fail("special_tokens: '", token, "' is listed twice; list each token once");
    if (token.size() == 1)
      fail("special_tokens: '", token, "' is a single byte, which the byte alphabet already holds; ",
           "use a longer token such as '<|", token, "|>'");
    std::vector<std::uint32_t> cps;
    if (!decode_utf8(token, cps)) fail("special_tokens: '", token, "' is not valid UTF-8");
    bool all_byte_level = std::all_of(cps.begin(), cps.end(), [](std::uint32_t cp) {
      return cp < 256 ? byte_level_keeps(static_cast<int>(cp)) : cp < 256 + 68;
    });
    bool all_ascii = std::all_of(cps.begin(), cps.end(), [](std::uint32_t cp) { return cp >= 33 && cp <= 126; });
    if (all_byte_level && !all_ascii)
      fail("special_tokens: '", token, "' is spelled only in byte-level symbols, so it would clash with the ",
           "byte-level spelling of a learned token; add a character outside them (e.g. '<|...|>')");
  }
}

struct QueueEntry {
  std::int64_t count;
  Symbol left, right;
};

// Max-heap order: the larger count first; among equal counts the smaller (left, right) ids first.
struct LowerPriority {
  bool operator()(const QueueEntry& a, const QueueEntry& b) const {
    if (a.count != b.count) return a.count < b.count;
    return std::tie(a.left, a.right) > std::tie(b.left, b.right);
  }
};

// Merges every non-overlapping (left, right), scanning left to right, into `merged`, and reports the
// pairs that disappear (-1) and appear (+1) around each merge. The merged pair itself is not reported:
// none of it is left afterwards.
template <class OnChange>
void merge_word(std::vector<Symbol>& symbols, Symbol left, Symbol right, Symbol merged, OnChange&& on_change) {
  std::size_t n = symbols.size(), out = 0;
  for (std::size_t i = 0; i < n;) {
    if (i + 1 < n && symbols[i] == left && symbols[i + 1] == right) {
      if (out > 0) {
        on_change(symbols[out - 1], left, -1);
        on_change(symbols[out - 1], merged, +1);
      }
      if (i + 2 < n) {
        on_change(right, symbols[i + 2], -1);
        on_change(merged, symbols[i + 2], +1);
      }
      symbols[out++] = merged;
      i += 2;
    } else {
      symbols[out++] = symbols[i++];
    }
  }
  symbols.resize(out);
}

}  // namespace

void check_trainer_config(const BpeTrainerConfig& config) {
  check_special_tokens(config.special_tokens);
  const std::int64_t fixed = static_cast<std::int64_t>(config.special_tokens.size()) + 256;
  if (config.vocab_size < fixed)
    fail("vocab_size ", config.vocab_size, " is too small: the vocabulary holds the ", config.special_tokens.size(),
         " special token(s) and all 256 bytes before any merge, so it must be at least ", fixed);
  if (config.vocab_size > std::int64_t{1} << 31)
    fail("vocab_size ", config.vocab_size, " is too large: ids are 32-bit; use at most 2147483648");
  if (config.min_frequency < 0)
    fail("min_frequency ", config.min_frequency, " is negative; use 0 or more (2 is the usual choice)");
  if (config.threads < 0) fail("threads ", config.threads, " is negative; use 0 (all available) or a count");
  if (config.max_input_bytes < 0)
    fail("max_input_bytes ", config.max_input_bytes, " is negative; use 0 (read everything) or a byte count");
}

namespace {

// The state of one training run: the vocabulary so far, each distinct piece as symbols with its count, the
// live count of every adjacent pair and the words holding it, and a max-queue of pairs by count whose stale
// entries (counts that changed since they were pushed) are re-pushed or dropped when they surface.
class BpeLearner {
 public:
  BpeLearner(const PieceCounts& pieces, const BpeTrainerConfig& config) : config_(config) {
    parts_.split_pattern = config.split_pattern;
    for (const auto& special : config.special_tokens) {
      Symbol id = add_token(special);
      parts_.added_tokens.push_back({special, static_cast<TokenId>(id), true});
    }
    specials_.insert(config.special_tokens.begin(), config.special_tokens.end());
    for (std::uint8_t b : byte_level_order()) byte_id_[b] = add_token(std::string(1, static_cast<char>(b)));
    read_words(pieces);
    count_pairs();
  }

  BpeParts learn() {
    const std::int64_t min_count = std::max<std::int64_t>(1, config_.min_frequency);
    while (static_cast<std::int64_t>(parts_.vocab.size()) < config_.vocab_size && !queue_.empty()) {
      QueueEntry top = queue_.top();
      queue_.pop();
      PairKey key = pair_key(top.left, top.right);
      auto live = pair_counts_.find(key);
      std::int64_t count = live == pair_counts_.end() ? 0 : live->second;
      if (count != top.count) {  // stale: put it back with its live count
        if (count > 0) queue_.push({count, top.left, top.right});
        continue;
      }
      if (count < min_count) break;
      merge(top, key);
    }
    return std::move(parts_);
  }

 private:
  Symbol add_token(std::string token) {
    auto id = static_cast<Symbol>(parts_.vocab.size());
    ids_.emplace(token, id);
    parts_.vocab.push_back(std::move(token));
    return id;
  }

  // Words: each distinct piece as symbols (its bytes' ids), with its count.
  void read_words(const PieceCounts& pieces) {
    words_.reserve(pieces.size());
    for (const auto& [piece, count] : pieces) {
      if (piece.empty() || count == 0) continue;
      std::vector<Symbol> symbols(piece.size());
      for (std::size_t i = 0; i < piece.size(); ++i) symbols[i] = byte_id_[static_cast<std::uint8_t>(piece[i])];
      words_.push_back(std::move(symbols));
      word_counts_.push_back(static_cast<std::int64_t>(count));
    }
    visited_.assign(words_.size(), 0);
  }

  void count_pairs() {
    pair_counts_.reserve(1 << 16);
    for (std::uint32_t w = 0; w < words_.size(); ++w) {
      const auto& symbols = words_[w];
      for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
        PairKey key = pair_key(symbols[i], symbols[i + 1]);
        pair_counts_[key] += word_counts_[w];
        auto& list = pair_words_[key];
        if (list.empty() || list.back() != w) list.push_back(w);
      }
    }
    for (const auto& [key, count] : pair_counts_) queue_.push({count, left_of(key), right_of(key)});
  }

  // Merges the most frequent pair into one token everywhere it occurs, updating the counts of the pairs
  // around each occurrence and queueing the pairs that appeared.
  void merge(const QueueEntry& top, PairKey key) {
    std::string token = parts_.vocab[top.left] + parts_.vocab[top.right];
    // Text never becomes a special token's id (Hugging Face would reuse that id here, so "ab" in a corpus
    // would encode as the special token "ab"): the pair is left unmerged for good.
    if (specials_.count(token)) {
      blocked_.insert(key);
      pair_counts_.erase(key);
      pair_words_.erase(key);
      return;
    }
    // A string learned before along another path (a+bc vs ab+c) keeps its first id.
    auto found = ids_.find(token);
    Symbol merged = found != ids_.end() ? found->second : add_token(token);
    // A pair merged before can come back when a reused id meets new neighbours; merging it again keeps
    // the words as the encoder would see them, and its rule is already in the list.
    if (merged_pairs_.insert(key).second) parts_.merges.emplace_back(parts_.vocab[top.left], parts_.vocab[top.right]);

    ++step_;
    std::vector<std::uint32_t> holders = std::move(pair_words_[key]);
    pair_words_.erase(key);
    pair_counts_.erase(key);
    appeared_.clear();
    for (std::uint32_t w : holders) {
      if (visited_[w] == step_) continue;
      visited_[w] = step_;
      const std::int64_t weight = word_counts_[w];
      merge_word(words_[w], top.left, top.right, merged, [&](Symbol a, Symbol b, int delta) {
        PairKey changed = pair_key(a, b);
        if (blocked_.count(changed)) return;
        pair_counts_[changed] += delta * weight;
        if (delta > 0) {
          auto& list = pair_words_[changed];
          if (list.empty() || list.back() != w) list.push_back(w);
          appeared_.push_back(changed);
        }
      });
    }
    std::sort(appeared_.begin(), appeared_.end());
    appeared_.erase(std::unique(appeared_.begin(), appeared_.end()), appeared_.end());
    for (PairKey changed : appeared_) {
      std::int64_t c = pair_counts_[changed];
      if (c > 0 && !blocked_.count(changed)) queue_.push({c, left_of(changed), right_of(changed)});
    }
  }

  const BpeTrainerConfig& config_;
  BpeParts parts_;
  std::unordered_map<std::string, Symbol> ids_;  // learned tokens (raw bytes) and special tokens -> id
  std::set<std::string> specials_;
  std::array<Symbol, 256> byte_id_{};
  std::vector<std::vector<Symbol>> words_;
  std::vector<std::int64_t> word_counts_;
  std::unordered_map<PairKey, std::int64_t> pair_counts_;
  std::unordered_map<PairKey, std::vector<std::uint32_t>> pair_words_;  // may hold stale or repeated words
  std::priority_queue<QueueEntry, std::vector<QueueEntry>, LowerPriority> queue_;
  std::unordered_set<PairKey> merged_pairs_, blocked_;
  std::vector<std::uint32_t> visited_;  // merge number that last visited each word
  std::vector<PairKey> appeared_;
  std::uint32_t step_ = 0;
};

}  // namespace

BpeParts learn_bpe(const PieceCounts& pieces, const BpeTrainerConfig& config) {
  check_trainer_config(config);
  std::uint64_t total = 0;
  for (const auto& [piece, count] : pieces)
    if (!piece.empty()) total += count;
  if (total == 0) fail("there is no text to learn from: the training input is empty");
  return BpeLearner(pieces, config).learn();
}

}  // namespace dew::data
