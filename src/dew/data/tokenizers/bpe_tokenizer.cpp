#include "dew/data/tokenizers/bpe_tokenizer.h"

#include "dew/core/printable.h"

#include <algorithm>
#include <atomic>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/data/tokenizers/byte_level.h"
#include "dew/data/tokenizers/piece_cache.h"
#include "dew/data/tokenizers/tokenizer_json.h"

namespace dew::data {
namespace {

std::atomic<std::uint64_t> next_serial{1};

// The piece cache of this thread for one tokenizer. A thread that switches among a few tokenizers keeps
// each one's cache; serials are never reused, so a destroyed tokenizer's cache is never mistaken.
PieceCache& thread_cache(std::uint64_t serial) {
  struct Entry {
    std::uint64_t serial;
    std::unique_ptr<PieceCache> cache;
  };
  thread_local std::vector<Entry> caches;
  for (auto& entry : caches)
    if (entry.serial == serial) return *entry.cache;
  if (caches.size() >= 4) caches.erase(caches.begin());
  caches.push_back(Entry{serial, std::make_unique<PieceCache>()});
  return *caches.back().cache;
}

BpeDefinition definition_from_parts(BpeParts parts) {
  BpeDefinition definition;
  definition.vocab.reserve(parts.vocab.size());
  for (std::size_t id = 0; id < parts.vocab.size(); ++id) {
    if (parts.vocab[id].empty()) fail("BpeParts.vocab[", id, "] is empty: every token has at least one byte");
    definition.vocab.push_back(to_byte_level(parts.vocab[id]));
  }
  definition.merges.reserve(parts.merges.size());
  for (auto& [left, right] : parts.merges) definition.merges.emplace_back(to_byte_level(left), to_byte_level(right));
  definition.added_tokens = std::move(parts.added_tokens);
  definition.split_patterns = {parts.split_pattern.empty() ? std::string(kGpt2Pattern) : parts.split_pattern};
  return definition;
}

// Each merge as (left id, right id, merged id), in rank order; errors name the merge and the missing token.
std::vector<std::array<TokenId, 3>> merge_ids(const std::string& name,
                                             const std::vector<std::pair<std::string, std::string>>& text_merges,
                                             const std::unordered_map<std::string_view, TokenId>& id_of_text) {
  std::vector<std::array<TokenId, 3>> merges;
  merges.reserve(text_merges.size());
  std::string joined;
  for (std::size_t rank = 0; rank < text_merges.size(); ++rank) {
    const auto& [left, right] = text_merges[rank];
    auto l = id_of_text.find(left), r = id_of_text.find(right);
    if (l == id_of_text.end() || r == id_of_text.end())
      fail(name, ": model.merges[", rank, "] ('", printable(left), "' '", printable(right), "'): '",
           printable(l == id_of_text.end() ? left : right), "' is not in model.vocab");
    joined.assign(left).append(right);
    auto m = id_of_text.find(joined);
    if (m == id_of_text.end())
      fail(name, ": model.merges[", rank, "] ('", printable(left), "' '", printable(right), "'): the merged token '",
           printable(joined), "' is not in model.vocab");
    merges.push_back({l->second, r->second, m->second});
  }
  return merges;
}

// Without an EOS given: the first of the usual end-of-text tokens the tokenizer has, a special added token
// before a vocabulary entry of the same text.
std::optional<TokenId> conventional_eos(const std::vector<AddedToken>& added_tokens,
                                        const std::unordered_map<std::string_view, TokenId>& id_of_text) {
  for (std::string_view candidate : {"<|endoftext|>", "<|end_of_text|>", "<|im_end|>", "</s>"}) {
    for (const AddedToken& added : added_tokens)
      if (added.special && added.content == candidate) return added.id;
    if (auto it = id_of_text.find(candidate); it != id_of_text.end()) return it->second;
  }
  return std::nullopt;
}

}  // namespace

BpeTokenizer::BpeTokenizer(BpeParts parts, std::string name)
    : BpeTokenizer(definition_from_parts(std::move(parts)), std::move(name)) {}

BpeTokenizer::BpeTokenizer(BpeDefinition definition, std::string name)
    : name_(std::move(name)),
      definition_(std::move(definition)),
      pre_tokenizer_([&] {
        try {
          return PreTokenizer(definition_.split_patterns);
        } catch (const Error& e) {
          fail(name_, ": pre_tokenizer: ", e.what());
        }
      }()),
      ignore_merges_(definition_.ignore_merges),
      serial_(next_serial++) {
  const auto& vocab = definition_.vocab;
  std::size_t size = vocab.size();
  for (const AddedToken& added : definition_.added_tokens) {
    if (added.id < 0) fail(name_, ": added_tokens: '", printable(added.content), "' has a negative id ", added.id);
    size = std::max(size, static_cast<std::size_t>(added.id) + 1);
  }
  bytes_.assign(size, std::string());
  present_.assign(size, false);

  // Vocabulary: the text -> id map is needed only here, to resolve merges.
  std::unordered_map<std::string_view, TokenId> id_of_text;
  id_of_text.reserve(vocab.size());
  for (std::size_t id = 0; id < vocab.size(); ++id) {
    if (vocab[id].empty()) continue;
    auto [it, inserted] = id_of_text.emplace(vocab[id], static_cast<TokenId>(id));
    if (!inserted)
      fail(name_, ": model.vocab: token '", printable(vocab[id]), "' has two ids, ", it->second, " and ", id);
    present_[id] = true;
    if (auto raw = from_byte_level(vocab[id])) {
      bytes_[id] = *raw;
      id_of_bytes_.emplace(*raw, static_cast<TokenId>(id));
    } else {
      // Outside the byte-level alphabet (a special token with other characters): its UTF-8 text, as Hugging
      // Face's ByteLevel decoder does. No merge can make it, so it only matters for decode.
      bytes_[id] = vocab[id];
    }
  }
  const auto& alphabet = byte_level_alphabet();
  for (int byte = 0; byte < 256; ++byte) {
    auto it = id_of_text.find(alphabet[byte]);
    // Some vocabularies lack a few bytes (SmolLM2 has no token for 21, e.g. 0x04, 0xC0, 0xF5-0xFF): like Hugging
    // Face's BPE without an unknown token, encoding drops such bytes (see encode_ordinary).
    byte_ids_[byte] = it == id_of_text.end() ? -1 : it->second;
    if (it == id_of_text.end()) has_untokenized_bytes_ = true;
  }

  merger_ = std::make_unique<BpeMerger>(byte_ids_, merge_ids(name_, definition_.merges, id_of_text));

  std::vector<bool> added_id(size, false);
  for (const AddedToken& added : definition_.added_tokens) {
    if (added.content.empty()) fail(name_, ": added_tokens: the token with id ", added.id, " has empty content");
    auto id = static_cast<std::size_t>(added.id);
    if (added_id[id] && bytes_[id] != added.content)
      fail(name_, ": added_tokens: id ", added.id, " is given to both '", printable(bytes_[id]), "' and '",
           printable(added.content), "'");
    if (!added_id[id] && id < vocab.size() && !vocab[id].empty() && vocab[id] != added.content &&
        bytes_[id] != added.content)
      fail(name_, ": added_tokens: '", printable(added.content), "' has id ", added.id, ", which is token '",
           printable(vocab[id]), "' in model.vocab");
    added_id[id] = true;
    bytes_[id] = added.content;
    present_[id] = true;
    added_by_length_.push_back(added);
    auto first = static_cast<unsigned char>(added.content[0]);
    if (added.special) {
      special_first_byte_[first] = true;
      has_special_added_ = true;
    } else {
      added_first_byte_[first] = true;
      has_plain_added_ = true;
    }
  }
  std::stable_sort(added_by_length_.begin(), added_by_length_.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });

  if (definition_.eos_id) {
    if (*definition_.eos_id < 0 || static_cast<std::size_t>(*definition_.eos_id) >= size ||
        !present_[static_cast<std::size_t>(*definition_.eos_id)])
      fail(name_, ": the EOS id ", *definition_.eos_id, " is not a token");
    eos_id_ = definition_.eos_id;
  } else {
    eos_id_ = conventional_eos(definition_.added_tokens, id_of_text);
  }
}

BpeTokenizer::~BpeTokenizer() = default;

std::optional<TokenId> BpeTokenizer::token_id(std::string_view raw_bytes) const {
  auto it = id_of_bytes_.find(std::string(raw_bytes));
  if (it == id_of_bytes_.end()) return std::nullopt;
  return it->second;
}

std::optional<BpeTokenizer::AddedMatch> BpeTokenizer::find_added(std::string_view text, std::size_t from,
                                                                 bool allow_special) const {
  for (std::size_t i = from; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (!added_first_byte_[c] && !(allow_special && special_first_byte_[c])) continue;
    for (const AddedToken& added : added_by_length_) {  // longest first: the first hit is the longest
      if (added.special && !allow_special) continue;
      if (text.compare(i, added.content.size(), added.content) == 0) return AddedMatch{i, added.content.size(), added.id};
    }
  }
  return std::nullopt;
}

void BpeTokenizer::encode_ordinary(std::string_view text, std::vector<TokenId>& out) const {
  PieceCache& cache = thread_cache(serial_);
  std::string kept;
  pre_tokenizer_.for_each_piece(text, [&](std::string_view piece) {
    if (has_untokenized_bytes_) {
      auto untokenized = [&](char c) { return byte_ids_[static_cast<unsigned char>(c)] < 0; };
      if (std::any_of(piece.begin(), piece.end(), untokenized)) {
        kept.assign(piece);
        kept.erase(std::remove_if(kept.begin(), kept.end(), untokenized), kept.end());
        if (kept.empty()) return;
        piece = kept;
      }
    }
    if (piece.size() == 1) {
      out.push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
      return;
    }
    std::uint64_t hash = PieceCache::hash(piece);
    if (auto hit = cache.find(piece, hash); !hit.empty()) {
      out.insert(out.end(), hit.begin(), hit.end());
      return;
    }
    std::size_t before = out.size();
    auto whole = ignore_merges_ ? id_of_bytes_.find(std::string(piece)) : id_of_bytes_.end();
    if (whole != id_of_bytes_.end()) out.push_back(whole->second);
    else merger_->merge(piece, out);
    cache.insert(piece, hash, std::span<const TokenId>(out.data() + before, out.size() - before));
  });
}

std::vector<TokenId> BpeTokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<TokenId> out;
  out.reserve(text.size() / 4 + 8);
  if (!has_plain_added_ && !(allow_special && has_special_added_)) {
    encode_ordinary(text, out);
    return out;
  }
  std::size_t pos = 0;
  while (auto match = find_added(text, pos, allow_special)) {
    encode_ordinary(text.substr(pos, match->start - pos), out);
    out.push_back(match->id);
    pos = match->start + match->length;
  }
  encode_ordinary(text.substr(pos), out);
  return out;
}

std::string BpeTokenizer::decode(std::span<const TokenId> ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    TokenId id = ids[i];
    if (id < 0 || static_cast<std::size_t>(id) >= bytes_.size() || !present_[static_cast<std::size_t>(id)])
      fail(name_, ": token id ", id, " at position ", i, " is not in the vocabulary (ids 0-", bytes_.size() - 1,
           id >= 0 && static_cast<std::size_t>(id) < bytes_.size() ? ", and this id is unused" : "", ")");
    out += bytes_[static_cast<std::size_t>(id)];
  }
  return out;
}

std::string BpeTokenizer::save(const std::filesystem::path& dir) const {
  std::filesystem::create_directories(dir);
  write_file_atomic(dir / "tokenizer.json", write_tokenizer_json(definition_));
  write_file_atomic(dir / "tokenizer_config.json", write_tokenizer_config_json(definition_, eos_id_));
  return "tokenizer.json";
}

// A cut before a space that sits between two ASCII letters ("a|_b") leaves the pieces unchanged for the
// patterns PreTokenizer vouches for: no alternative of theirs matches a letter followed by a space (letter
// runs stop at the space; the space-led alternatives start at it), none looks behind, and the only
// look-ahead, `\s+(?!\S)`, would need a space before the cut. Added tokens are found before pre-tokenizing,
// so the cut must also not fall inside an occurrence of one.
std::size_t BpeTokenizer::safe_cut(std::string_view text, std::size_t from, std::size_t limit) const {
  if (!pre_tokenizer_.splits_before_space_between_letters()) return text.size();
  auto is_letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  limit = std::min(limit, text.size());
  for (std::size_t cut = std::max<std::size_t>(from, 1); cut + 1 < limit; ++cut) {
    if (text[cut] != ' ' || !is_letter(text[cut - 1]) || !is_letter(text[cut + 1])) continue;
    bool inside_added = false;
    for (const AddedToken& added : added_by_length_) {
      std::size_t n = added.content.size();
      if (n < 2) continue;
      std::size_t window_start = cut >= n - 1 ? cut - (n - 1) : 0;
      std::string_view window = text.substr(window_start, std::min(text.size(), cut + n - 1) - window_start);
      for (std::size_t at = window.find(added.content); at != std::string_view::npos;
           at = window.find(added.content, at + 1))
        if (window_start + at < cut && window_start + at + n > cut) inside_added = true;
    }
    if (!inside_added) return cut;
  }
  return text.size();
}

}  // namespace dew::data
