// The pre-tokenizer: pieces tile the input (invalid UTF-8 included), and the hand-written GPT-2 matcher
// gives exactly PCRE2's pieces.
#include <gtest/gtest.h>

#include <random>

#include "dew/data/tokenizers/pretokenizer.h"

namespace dew::data {
namespace {

std::vector<std::string> pieces(const PreTokenizer& pre, std::string_view text) {
  std::vector<std::string> out;
  pre.for_each_piece(text, [&](std::string_view piece) { out.emplace_back(piece); });
  return out;
}

// The same regex spelt as tiktoken does, so PreTokenizer does not use the hand-written matcher for it.
const char* kGpt2TiktokenSpelling = R"('(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

TEST(PreTokenizer, Gpt2PiecesOfASentence) {
  PreTokenizer pre({std::string(kGpt2Pattern)});
  EXPECT_EQ(pieces(pre, "Hello, world!  It's 2024\n\n ok"),
            (std::vector<std::string>{"Hello", ",", " world", "!", " ", " It", "'s", " 2024", "\n\n", " ok"}));
  EXPECT_EQ(pieces(pre, ""), std::vector<std::string>{});
}

TEST(PreTokenizer, HandWrittenGpt2MatcherEqualsPcre2OnAllShortStrings) {
  PreTokenizer fast({std::string(kGpt2Pattern)}), reference({kGpt2TiktokenSpelling});
  // ASCII of every class and the contraction letters, plus non-ASCII letters, digits, spaces and bad bytes.
  const std::vector<std::string> alphabet = {"a", "Z", "s", "l", "r", "e", "v", "1", "'", " ", "\t", "\n", "\r", "\v",
                                             ".", "\x1c", "\x7f", "\xc3\xa9", "\xc2\xa0", "\xe3\x80\x80", "\xd9\xa3", "\xff"};
  const std::size_t n = alphabet.size();
  std::size_t compared = 0;
  for (int length = 1; length <= 4; ++length) {
    std::size_t count = 1;
    for (int i = 0; i < length; ++i) count *= n;
    for (std::size_t code = 0; code < count; ++code) {
      std::string text;
      for (std::size_t c = code, i = 0; i < static_cast<std::size_t>(length); ++i, c /= n) text += alphabet[c % n];
      ASSERT_EQ(pieces(fast, text), pieces(reference, text)) << "text: '" << text << "'";
      ++compared;
    }
  }
  EXPECT_EQ(compared, n + n * n + n * n * n + n * n * n * n);
}

TEST(PreTokenizer, HandWrittenGpt2MatcherEqualsPcre2OnRandomText) {
  PreTokenizer fast({std::string(kGpt2Pattern)}), reference({kGpt2TiktokenSpelling});
  std::mt19937 rng(5);
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    std::size_t length = rng() % 200;
    for (std::size_t j = 0; j < length; ++j) {
      // Mostly ASCII, sometimes any byte.
      text += static_cast<char>(rng() % 8 == 0 ? rng() & 0xFF : rng() % 0x80);
    }
    ASSERT_EQ(pieces(fast, text), pieces(reference, text));
  }
}

TEST(PreTokenizer, PiecesTileAnyBytes) {
  std::mt19937 rng(11);
  for (std::string_view pattern : {kGpt2Pattern, kLlama3Pattern, kQwen2Pattern}) {
    PreTokenizer pre({std::string(kEachDigitPattern), std::string(pattern)});
    for (int i = 0; i < 500; ++i) {
      std::string text(rng() % 100, '\0');
      for (char& c : text) c = static_cast<char>(rng() & 0xFF);
      std::string joined;
      for (const auto& piece : pieces(pre, text)) {
        EXPECT_FALSE(piece.empty());
        joined += piece;
      }
      ASSERT_EQ(joined, text);
    }
  }
}

TEST(PreTokenizer, InvalidPatternIsAnErrorNamingIt) {
  try {
    PreTokenizer pre({"(?<bad"});
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("(?<bad"), std::string::npos) << e.what();
  }
}

TEST(PreTokenizer, OnlyProvenPatternsAllowCuts) {
  EXPECT_TRUE(PreTokenizer({std::string(kGpt2Pattern)}).splits_before_space_between_letters());
  EXPECT_TRUE(PreTokenizer({std::string(kEachDigitPattern), std::string(kLlama3Pattern)}).splits_before_space_between_letters());
  EXPECT_FALSE(PreTokenizer({R"(\S+\s?)"}).splits_before_space_between_letters());
}

}  // namespace
}  // namespace dew::data
