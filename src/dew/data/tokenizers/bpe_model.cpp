// The general BPE model: symbols are the piece's characters (as tokens), merged pairwise by rank or score.
// The byte-level fast path for GPT-2-style files is BpeTokenizer; this one serves every other BPE.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <queue>

#include "dew/core/error.h"
#include "dew/core/printable.h"
#include "dew/data/tokenizers/piece_cache.h"
#include "dew/data/tokenizers/token_model.h"
#include "dew/data/tokenizers/unicode_text.h"

namespace dew::data {

void Vocabulary::add(std::string token, TokenId id) {
  if (static_cast<std::size_t>(id) >= tokens.size()) tokens.resize(static_cast<std::size_t>(id) + 1);
  if (ids.emplace(token, id).second || tokens[static_cast<std::size_t>(id)].empty())
    tokens[static_cast<std::size_t>(id)] = std::move(token);
}

std::string byte_fallback_token(unsigned char byte) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "<0x%02X>", byte);
  return buffer;
}

namespace {

struct Merge {
  double priority;  // lower merges first
  TokenId merged;
};

// (left, right) -> Merge in one flat open-addressed array: the lookup of the merge loop.
class PairTable {
 public:
  void build(const std::vector<std::pair<std::uint64_t, Merge>>& entries) {
    std::size_t size = 16;
    while (size < entries.size() * 2) size *= 2;
    slots_.assign(size, Slot{kEmpty, Merge{0, 0}});
    shift_ = 64 - __builtin_ctzll(size);
    for (const auto& [key, merge] : entries) {
      std::size_t i = index(key);
      while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & (slots_.size() - 1);
      slots_[i] = Slot{key, merge};
    }
  }
  const Merge* find(std::uint64_t key) const {
    if (slots_.empty()) return nullptr;
    for (std::size_t i = index(key);; i = (i + 1) & (slots_.size() - 1)) {
      if (slots_[i].key == key) return &slots_[i].merge;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  struct Slot {
    std::uint64_t key;
    Merge merge;
  };
  std::size_t index(std::uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
  std::vector<Slot> slots_;
  int shift_ = 64;
};

std::atomic<std::uint64_t> next_serial{1};

// This thread's word cache for one model (see piece_cache.h); serials are never reused.
PieceCache& word_cache(std::uint64_t serial) {
  thread_local std::vector<std::pair<std::uint64_t, std::unique_ptr<PieceCache>>> caches;
  for (auto& [owner, cache] : caches)
    if (owner == serial) return *cache;
  if (caches.size() >= 4) caches.erase(caches.begin());
  caches.emplace_back(serial, std::make_unique<PieceCache>());
  return *caches.back().second;
}

class BpeModel final : public TokenModel {
 public:
  BpeModel(Vocabulary vocabulary, BpeModelOptions options) : vocabulary_(std::move(vocabulary)), options_(std::move(options)) {
    if (options_.unk_token) unk_id_ = vocabulary_.find(*options_.unk_token);
    for (int b = 0; b < 256; ++b) byte_ids_[b] = vocabulary_.find(byte_fallback_token(static_cast<unsigned char>(b))).value_or(-1);
    bool bare = options_.continuing_subword_prefix.empty() && options_.end_of_word_suffix.empty();
    for (int c = 0; c < 128; ++c)
      ascii_ids_[c] = bare ? vocabulary_.find(std::string(1, static_cast<char>(c))).value_or(-1) : kNotAscii;
    if (bare)
      for (std::size_t id = 0; id < vocabulary_.tokens.size(); ++id) {
        const std::string& token = vocabulary_.tokens[id];
        std::size_t n = 0;
        if (!token.empty() && static_cast<unsigned char>(token[0]) >= 0x80) {
          char32_t c = utf8_char_at(token, 0, n);
          if (n == token.size() && n > 1) char_ids_.try_emplace(c, static_cast<TokenId>(id));
        }
      }
  }

  void set_merges(const std::vector<std::pair<std::string, std::string>>& merges, const std::string& where) {
    const std::string& prefix = options_.continuing_subword_prefix;
    std::vector<std::pair<std::uint64_t, Merge>> entries;
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
      const auto& [left, right] = merges[rank];
      auto l = vocabulary_.find(left), r = vocabulary_.find(right);
      std::string joined = left + (!prefix.empty() && right.starts_with(prefix) ? right.substr(prefix.size()) : right);
      auto m = vocabulary_.find(joined);
      if (!l || !r || !m)
        fail(where, ": model.merges[", rank, "] ('", printable(left), "' '", printable(right), "'): '",
             printable(!l ? left : !r ? right : joined), "' is not in model.vocab");
      entries.emplace_back(key(*l, *r), Merge{static_cast<double>(rank), *m});  // a later rank replaces
    }
    merges_.build(entries);
    find_word_starts();
  }
  // SentencePiece's rule as a pair table: every way to write a token as two tokens is a merge of that
  // token's score (higher first), so encoding looks up two ids instead of joining strings.
  void set_scores(const std::vector<float>& scores) {
    const auto& tokens = vocabulary_.tokens;
    std::unordered_map<std::uint64_t, Merge> best;
    for (std::size_t id = 0; id < tokens.size(); ++id) {
      const std::string& token = tokens[id];
      for (std::size_t cut = 1; cut < token.size(); ++cut) {
        if ((static_cast<unsigned char>(token[cut]) & 0xC0) == 0x80) continue;  // inside a character
        auto l = vocabulary_.find(std::string_view(token).substr(0, cut));
        auto r = vocabulary_.find(std::string_view(token).substr(cut));
        if (!l || !r) continue;
        Merge merge{-static_cast<double>(scores[id]), static_cast<TokenId>(id)};
        auto [it, inserted] = best.try_emplace(key(*l, *r), merge);
        if (!inserted && merge.priority < it->second.priority) it->second = merge;
      }
    }
    merges_.build(std::vector<std::pair<std::uint64_t, Merge>>(best.begin(), best.end()));
    find_word_starts();
  }

  // Whether merges can never join across a '▁' that follows another character: true when no token has
  // such a '▁' (SentencePiece's split_by_whitespace vocabularies), '▁' is a token, and there is no subword
  // prefix or word suffix. Then each stretch
  // from one word start to the next is merged alone, which keeps the merge heap small on long text.
  void find_word_starts() {
    static const std::string marker = "\xE2\x96\x81";
    // A subword prefix or word suffix depends on where the piece starts and ends: no cutting then.
    if (!options_.continuing_subword_prefix.empty() || !options_.end_of_word_suffix.empty()) return;
    if (!vocabulary_.find(marker)) return;
    for (const std::string& token : vocabulary_.tokens)
      for (std::size_t at = token.find(marker, 1); at != std::string::npos; at = token.find(marker, at + 1))
        if (at < marker.size() || token.compare(at - marker.size(), marker.size(), marker) != 0) return;
    split_words_ = true;
  }

  const Vocabulary& vocabulary() const override { return vocabulary_; }

  void tokenize(std::string_view piece, std::vector<TokenId>& out) const override {
    if (piece.empty()) return;
    if (options_.ignore_merges)
      if (auto whole = vocabulary_.find(piece)) return out.push_back(*whole);
    if (!split_words_) return tokenize_word(piece, out);
    static const std::string_view marker = "\xE2\x96\x81";
    std::size_t start = 0;
    for (std::size_t at = piece.find(marker, 1); at != std::string_view::npos; at = piece.find(marker, at + 1)) {
      if (at >= marker.size() && piece.compare(at - marker.size(), marker.size(), marker) == 0) continue;  // a run of '▁'
      tokenize_word(piece.substr(start, at - start), out);
      start = at;
    }
    tokenize_word(piece.substr(start), out);
  }

 private:
  // Prose repeats its words: each thread remembers the ids of the words it has merged.
  void tokenize_word(std::string_view piece, std::vector<TokenId>& out) const {
    PieceCache& cache = word_cache(serial_);
    std::uint64_t hash = PieceCache::hash(piece);
    if (auto hit = cache.find(piece, hash); !hit.empty()) return out.insert(out.end(), hit.begin(), hit.end()), void();
    std::size_t before = out.size();
    std::vector<Symbol> symbols = initial_symbols(piece);
    merge_all(symbols);
    for (const Symbol& s : symbols)
      if (s.length > 0) out.push_back(s.id);
    if (out.size() > before) cache.insert(piece, hash, std::span<const TokenId>(out.data() + before, out.size() - before));
  }

  struct Symbol {
    TokenId id;
    int prev, next;
    std::size_t length;  // 0: merged away
  };
  static std::uint64_t key(TokenId l, TokenId r) { return (std::uint64_t(std::uint32_t(l)) << 32) | std::uint32_t(r); }

  std::optional<Merge> find_merge(TokenId l, TokenId r) const {
    const Merge* merge = merges_.find(key(l, r));
    return merge ? std::optional<Merge>(*merge) : std::nullopt;
  }

  // Hugging Face's order: each character (with the subword prefix unless first, the word suffix if last) as a
  // token; else its bytes as <0xXX> tokens (byte_fallback); else unk, consecutive unks fused when fuse_unk.
  std::vector<Symbol> initial_symbols(std::string_view piece) const {
    std::vector<Symbol> symbols;
    std::size_t unk_length = 0;  // bytes of the pending unk, 0 when none
    auto push = [&](TokenId id, std::size_t length) {
      symbols.push_back(Symbol{id, static_cast<int>(symbols.size()) - 1, static_cast<int>(symbols.size()) + 1, length});
    };
    auto flush_unk = [&] {
      if (unk_length > 0) push(*unk_id_, unk_length);
      unk_length = 0;
    };
    std::string text;
    for (std::size_t pos = 0, n = 0; pos < piece.size(); pos += n) {
      auto byte = static_cast<unsigned char>(piece[pos]);
      if (byte < 0x80 && ascii_ids_[byte] >= 0) {  // the common case, without building a string
        flush_unk();
        push(ascii_ids_[byte], n = 1);
        continue;
      }
      char32_t c = utf8_char_at(piece, pos, n);
      if (n > 1 && ascii_ids_[0] != kNotAscii) {  // a whole multi-byte character: look it up by code point
        if (auto it = char_ids_.find(c); it != char_ids_.end()) {
          flush_unk();
          push(it->second, n);
          continue;
        }
      }
      text.assign(pos > 0 ? options_.continuing_subword_prefix : "").append(piece.substr(pos, n));
      if (pos + n == piece.size()) text += options_.end_of_word_suffix;
      if (auto id = vocabulary_.find(text)) {
        flush_unk();
        push(*id, n);
        continue;
      }
      if (options_.byte_fallback && std::all_of(text.begin(), text.end(), [&](char c) { return byte_ids_[static_cast<unsigned char>(c)] >= 0; })) {
        for (char c : text) push(byte_ids_[static_cast<unsigned char>(c)], 1);
        continue;
      }
      if (!unk_id_) continue;  // no unk token: the character is dropped, as Hugging Face does
      if (!options_.fuse_unk) flush_unk();
      unk_length += n;
    }
    flush_unk();
    if (!symbols.empty()) symbols.back().next = -1;
    return symbols;
  }

  void merge_all(std::vector<Symbol>& symbols) const {
    struct Candidate {
      double priority;
      int pos;
      TokenId merged;
      bool operator>(const Candidate& o) const { return priority != o.priority ? priority > o.priority : pos > o.pos; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
    auto consider = [&](int left) {
      if (left < 0 || symbols[left].next < 0) return;
      if (auto m = find_merge(symbols[left].id, symbols[symbols[left].next].id)) queue.push({m->priority, left, m->merged});
    };
    for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) consider(i);
    while (!queue.empty()) {
      Candidate top = queue.top();
      queue.pop();
      Symbol& left = symbols[top.pos];
      if (left.length == 0 || left.next < 0) continue;
      auto current = find_merge(left.id, symbols[left.next].id);  // a stale entry: the pair has changed since
      if (!current || current->merged != top.merged || current->priority != top.priority) continue;
      Symbol& right = symbols[left.next];
      left.id = top.merged;
      left.length += right.length;
      left.next = right.next;
      right.length = 0;
      if (left.next >= 0) symbols[left.next].prev = top.pos;
      consider(left.prev);
      consider(top.pos);
    }
  }

  Vocabulary vocabulary_;
  BpeModelOptions options_;
  std::optional<TokenId> unk_id_;
  std::array<TokenId, 256> byte_ids_{};
  PairTable merges_;
  bool split_words_ = false;  // find_word_starts
  static constexpr TokenId kNotAscii = -2;
  std::array<TokenId, 128> ascii_ids_{};  // single-character tokens of ASCII bytes; -1: none, -2: not used
  std::unordered_map<char32_t, TokenId> char_ids_;  // single-character tokens of other characters
  std::uint64_t serial_ = next_serial++;
};

}  // namespace

TokenModelPtr make_bpe_model(Vocabulary vocabulary, const std::vector<std::pair<std::string, std::string>>& merges,
                             BpeModelOptions options, const std::string& where) {
  auto model = std::make_unique<BpeModel>(std::move(vocabulary), std::move(options));
  model->set_merges(merges, where);
  return model;
}

TokenModelPtr make_scored_bpe_model(Vocabulary vocabulary, std::vector<float> scores, BpeModelOptions options) {
  scores.resize(vocabulary.tokens.size(), 0.0f);
  auto model = std::make_unique<BpeModel>(std::move(vocabulary), std::move(options));
  model->set_scores(scores);
  return model;
}

}  // namespace dew::data
