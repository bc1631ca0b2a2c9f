#pragma once
// Splits text into the pieces BPE merges within, by a sequence of regexes (PCRE2, JIT-compiled, UTF + UCP).
//
// Each regex splits every piece made by the ones before it, and both its matches and the text between
// them become pieces: Hugging Face's Split(behavior "Isolated") semantics, which also describes
// ByteLevel(use_regex=true) (GPT-2's regex) and Digits (\p{N} or \p{N}+). Invalid UTF-8 is matched by
// nothing (PCRE2_MATCH_INVALID_UTF), so it ends up in the pieces between matches and is never lost:
// the pieces always tile the input.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dew::data {

// GPT-2's pre-tokenizer regex, as in Hugging Face's ByteLevel(use_regex=true).
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3's (also SmolLM3's) and Qwen 2's Split regexes.
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Hugging Face's Digits pre-tokenizer: one piece per digit, or per run of digits.
inline constexpr std::string_view kEachDigitPattern = R"(\p{N})";
inline constexpr std::string_view kDigitRunPattern = R"(\p{N}+)";

class PreTokenizer {
 public:
  // Errors (a regex PCRE2 refuses) are dew::Error naming the pattern and PCRE2's message.
  explicit PreTokenizer(std::vector<std::string> patterns);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  const std::vector<std::string>& patterns() const { return patterns_; }

  // Calls piece(std::string_view) for each non-empty piece of text, in order.
  template <class F>
  void for_each_piece(std::string_view text, F&& piece) const {
    split(0, text, piece);
  }

  // True when every regex is one for which a space between two ASCII letters ("a b") always starts a
  // piece and no match reads across it, so text can be cut there without changing the pieces. Proven
  // for the patterns named above (see safe_cut in bpe_tokenizer.cpp); false for any other pattern.
  bool splits_before_space_between_letters() const { return cuts_between_words_; }

  // The first match of regex `step` in subject at or after `offset`, as [start, end).
  bool find(std::size_t step, std::string_view subject, std::size_t offset, std::size_t& start,
            std::size_t& end) const;

 private:
  struct Step;

  template <class F>
  void split(std::size_t step, std::string_view text, F& piece) const {
    if (step == steps_.size()) {
      if (!text.empty()) piece(text);
      return;
    }
    std::size_t gap = 0, search = 0, start = 0, end = 0;
    while (search < text.size() && find(step, text, search, start, end)) {
      if (end == start) {  // an empty match makes no piece: search on from the next character
        search = start + 1;
        while (search < text.size() && (static_cast<unsigned char>(text[search]) & 0xC0) == 0x80) ++search;
        continue;
      }
      if (start > gap) split(step + 1, text.substr(gap, start - gap), piece);
      split(step + 1, text.substr(start, end - start), piece);
      gap = search = end;
    }
    if (gap < text.size()) split(step + 1, text.substr(gap), piece);
  }

  std::vector<std::string> patterns_;
  std::vector<std::unique_ptr<Step>> steps_;
  bool cuts_between_words_ = false;
};

}  // namespace dew::data
