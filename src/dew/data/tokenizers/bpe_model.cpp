// The general BPE model: symbols are the piece's characters (as tokens), merged pairwise by rank or score.
// The byte-level fast path for GPT-2-style files is BpeTokenizer; this one serves every other BPE.
#include <algorithm>
#include <cstdio>
#include <queue>

#include "dew/core/error.h"
#include "dew/core/printable.h"
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

class BpeModel final : public TokenModel {
 public:
  BpeModel(Vocabulary vocabulary, BpeModelOptions options) : vocabulary_(std::move(vocabulary)), options_(std::move(options)) {
    if (options_.unk_token) unk_id_ = vocabulary_.find(*options_.unk_token);
    for (int b = 0; b < 256; ++b) byte_ids_[b] = vocabulary_.find(byte_fallback_token(static_cast<unsigned char>(b))).value_or(-1);
  }

  void set_merges(const std::vector<std::pair<std::string, std::string>>& merges, const std::string& where) {
    const std::string& prefix = options_.continuing_subword_prefix;
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
      const auto& [left, right] = merges[rank];
      auto l = vocabulary_.find(left), r = vocabulary_.find(right);
      std::string joined = left + (!prefix.empty() && right.starts_with(prefix) ? right.substr(prefix.size()) : right);
      auto m = vocabulary_.find(joined);
      if (!l || !r || !m)
        fail(where, ": model.merges[", rank, "] ('", printable(left), "' '", printable(right), "'): '",
             printable(!l ? left : !r ? right : joined), "' is not in model.vocab");
      merges_.insert_or_assign(key(*l, *r), Merge{static_cast<double>(rank), *m});
    }
  }
  void set_scores(std::vector<float> scores) { scores_ = std::move(scores); }

  const Vocabulary& vocabulary() const override { return vocabulary_; }

  void tokenize(std::string_view piece, std::vector<TokenId>& out) const override {
    if (piece.empty()) return;
    if (options_.ignore_merges)
      if (auto whole = vocabulary_.find(piece)) return out.push_back(*whole);
    std::vector<Symbol> symbols = initial_symbols(piece);
    merge_all(symbols);
    for (const Symbol& s : symbols)
      if (s.length > 0) out.push_back(s.id);
  }

 private:
  struct Symbol {
    TokenId id;
    int prev, next;
    std::size_t length;  // 0: merged away
  };
  static std::uint64_t key(TokenId l, TokenId r) { return (std::uint64_t(std::uint32_t(l)) << 32) | std::uint32_t(r); }

  std::optional<Merge> find_merge(TokenId l, TokenId r) const {
    if (scores_.empty()) {
      auto it = merges_.find(key(l, r));
      return it == merges_.end() ? std::nullopt : std::optional<Merge>(it->second);
    }
    auto joined = vocabulary_.find(vocabulary_.tokens[static_cast<std::size_t>(l)] + vocabulary_.tokens[static_cast<std::size_t>(r)]);
    if (!joined) return std::nullopt;
    return Merge{-static_cast<double>(scores_[static_cast<std::size_t>(*joined)]), *joined};
  }

  // Hugging Face's order: each character (with the subword prefix unless first, the word suffix if last) as a
  // token; else its bytes as <0xXX> tokens (byte_fallback); else unk, consecutive unks fused when fuse_unk.
  std::vector<Symbol> initial_symbols(std::string_view piece) const {
    std::vector<Symbol> symbols;
    std::optional<Symbol> unk;
    auto push = [&](TokenId id, std::size_t length) {
      symbols.push_back(Symbol{id, static_cast<int>(symbols.size()) - 1, static_cast<int>(symbols.size()) + 1, length});
    };
    std::string text;
    for (std::size_t pos = 0, n = 0; pos < piece.size(); pos += n) {
      n = utf8_char_length(piece, pos);
      text.assign(pos > 0 ? options_.continuing_subword_prefix : "").append(piece.substr(pos, n));
      if (pos + n == piece.size()) text += options_.end_of_word_suffix;
      if (auto id = vocabulary_.find(text)) {
        if (unk) push(unk->id, unk->length), unk.reset();
        push(*id, n);
        continue;
      }
      if (options_.byte_fallback && std::all_of(text.begin(), text.end(), [&](char c) { return byte_ids_[static_cast<unsigned char>(c)] >= 0; })) {
        for (char c : text) push(byte_ids_[static_cast<unsigned char>(c)], 1);
        continue;
      }
      if (!unk_id_) continue;  // no unk token: the character is dropped, as Hugging Face does
      if (unk && options_.fuse_unk) unk->length += n;
      else {
        if (unk) push(unk->id, unk->length);
        unk = Symbol{*unk_id_, 0, 0, n};
      }
    }
    if (unk) push(unk->id, unk->length);
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
  std::unordered_map<std::uint64_t, Merge> merges_;
  std::vector<float> scores_;  // non-empty: merge by score (SentencePiece)
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
  model->set_scores(std::move(scores));
  return model;
}

}  // namespace dew::data
