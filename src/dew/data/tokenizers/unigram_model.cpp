// Unigram (SentencePiece's other model, T5 and friends): the segmentation of a piece into vocabulary pieces
// with the highest total score, found by Viterbi over a trie of the pieces, as Hugging Face's
// encode_optimized does it: a character no piece covers becomes unk scored (lowest score - 10), adjacent
// unks are fused into one, and with byte_fallback an unknown piece becomes its <0xXX> byte tokens.
#include <algorithm>
#include <limits>

#include "dew/core/error.h"
#include "dew/data/tokenizers/token_model.h"
#include "dew/data/tokenizers/unicode_text.h"

namespace dew::data {
namespace {

// A byte trie over the pieces; transitions in one hash map keyed by (node, byte).
class PieceTrie {
 public:
  void insert(std::string_view piece, TokenId id) {
    std::uint32_t node = 0;
    for (unsigned char c : piece) {
      auto [it, inserted] = edges_.try_emplace(edge(node, c), static_cast<std::uint32_t>(ids_.size()));
      if (inserted) ids_.push_back(-1);
      node = it->second;
    }
    if (ids_[node] < 0) ids_[node] = id;
  }
  // Calls found(length, id) for each piece that is a prefix of text, shortest first.
  template <class F>
  void prefixes(std::string_view text, F&& found) const {
    std::uint32_t node = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
      auto it = edges_.find(edge(node, static_cast<unsigned char>(text[i])));
      if (it == edges_.end()) return;
      node = it->second;
      if (ids_[node] >= 0) found(i + 1, ids_[node]);
    }
  }

 private:
  static std::uint64_t edge(std::uint32_t node, unsigned char c) { return (std::uint64_t(node) << 8) | c; }
  std::unordered_map<std::uint64_t, std::uint32_t> edges_;
  std::vector<TokenId> ids_{-1};  // node -> piece id, -1 when no piece ends there
};

class UnigramModel final : public TokenModel {
 public:
  UnigramModel(std::vector<std::pair<std::string, double>> pieces, std::optional<TokenId> unk_id, bool byte_fallback)
      : unk_id_(unk_id), byte_fallback_(byte_fallback) {
    double min_score = std::numeric_limits<double>::max();
    for (std::size_t id = 0; id < pieces.size(); ++id) {
      vocabulary_.add(pieces[id].first, static_cast<TokenId>(id));
      trie_.insert(pieces[id].first, static_cast<TokenId>(id));
      scores_.push_back(pieces[id].second);
      min_score = std::min(min_score, pieces[id].second);
    }
    unk_score_ = (pieces.empty() ? 0.0 : min_score) - 10.0;
  }

  const Vocabulary& vocabulary() const override { return vocabulary_; }

  void tokenize(std::string_view piece, std::vector<TokenId>& out) const override {
    for (const std::string& part : best_path(piece)) {
      if (auto id = vocabulary_.find(part)) {
        out.push_back(*id);
        continue;
      }
      if (byte_fallback_) {
        std::vector<TokenId> bytes;
        for (unsigned char c : part)
          if (auto id = vocabulary_.find(byte_fallback_token(c))) bytes.push_back(*id);
        if (bytes.size() == part.size()) {
          out.insert(out.end(), bytes.begin(), bytes.end());
          continue;
        }
      }
      if (!unk_id_) fail("Unigram model: '", part, "' is not in the vocabulary and the model has no unk_id");
      out.push_back(*unk_id_);
    }
  }

 private:
  struct Node {
    double score = 0;
    std::size_t start = 0;
    TokenId id = -1;  // -1: not reached
  };

  std::vector<std::string> best_path(std::string_view text) const {
    std::vector<Node> best(text.size() + 1);
    best[0].id = 0;
    for (std::size_t start = 0, n = 0; start < text.size(); start += n) {
      n = utf8_char_length(text, start);
      if (best[start].id < 0 && start > 0) continue;
      double here = best[start].score;
      bool single = false;
      trie_.prefixes(text.substr(start), [&](std::size_t length, TokenId id) {
        Node& target = best[start + length];
        double score = here + scores_[static_cast<std::size_t>(id)];
        if (target.id < 0 || score > target.score) target = Node{score, start, id};
        if (length == n) single = true;
      });
      if (!single) {
        Node& target = best[start + n];
        double score = here + unk_score_;
        if (target.id < 0 || score > target.score) target = Node{score, start, unk_id_.value_or(-2)};
      }
    }
    std::vector<std::string> parts;
    std::string unknown;  // fused unk text, collected backwards
    for (std::size_t end = text.size(); end > 0;) {
      const Node& node = best[end];
      std::string part(text.substr(node.start, end - node.start));
      bool is_unk = node.id == -2 || (unk_id_ && node.id == *unk_id_);
      if (is_unk) {
        unknown.insert(0, part);
      } else {
        if (!unknown.empty()) parts.push_back(std::move(unknown)), unknown.clear();
        parts.push_back(std::move(part));
      }
      end = node.start;
    }
    if (!unknown.empty()) parts.push_back(std::move(unknown));
    std::reverse(parts.begin(), parts.end());
    return parts;
  }

  Vocabulary vocabulary_;
  PieceTrie trie_;
  std::vector<double> scores_;
  std::optional<TokenId> unk_id_;
  bool byte_fallback_;
  double unk_score_ = -10;
};

}  // namespace

TokenModelPtr make_unigram_model(std::vector<std::pair<std::string, double>> pieces, std::optional<TokenId> unk_id,
                                 bool byte_fallback) {
  return std::make_unique<UnigramModel>(std::move(pieces), unk_id, byte_fallback);
}

}  // namespace dew::data
