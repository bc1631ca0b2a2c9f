// The byte-level BPE trainer: merges computed by hand, the incremental bookkeeping against a recount
// from scratch, refusals, and (with fixtures from tools/reference/make_trained_tokenizer_fixtures.py)
// determinism and agreement with Hugging Face `tokenizers` on a trained tokenizer.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "dew/core/error.h"
#include "dew/data/tokenizers/bpe_trainer.h"
#include "dew/data/tokenizers/pretokenizer.h"
#include "dew/core/sha256.h"
#include "test_support.h"

using dew::test::error_of;

namespace dew::data {
namespace {

using Merges = std::vector<std::pair<std::string, std::string>>;

BpeTrainerConfig config_with(std::int64_t vocab_size, std::int64_t min_frequency = 1,
                             std::vector<std::string> specials = {}) {
  BpeTrainerConfig config;
  config.vocab_size = vocab_size;
  config.min_frequency = min_frequency;
  config.special_tokens = std::move(specials);
  return config;
}

TEST(BpeTrainer, ClassicExampleMergesAsByHand) {
  // "aaabdaaabac": aa (4) -> Z; then Za and ab tie at 2 and ab wins (smaller ids); then (aa, ab) at 2.
  BpeParts parts = learn_bpe({{"aaabdaaabac", 1}}, config_with(256 + 3));
  EXPECT_EQ(parts.merges, (Merges{{"a", "a"}, {"a", "b"}, {"aa", "ab"}}));
  ASSERT_EQ(parts.vocab.size(), 259u);
  EXPECT_EQ(parts.vocab[256], "aa");
  EXPECT_EQ(parts.vocab[257], "ab");
  EXPECT_EQ(parts.vocab[258], "aaab");
  EXPECT_TRUE(parts.added_tokens.empty());
}

TEST(BpeTrainer, StopsWhenNoPairIsFrequentEnough) {
  // After the three merges above every pair occurs once, below min_frequency 2.
  BpeParts parts = learn_bpe({{"aaabdaaabac", 1}}, config_with(1000, 2));
  EXPECT_EQ(parts.merges, (Merges{{"a", "a"}, {"a", "b"}, {"aa", "ab"}}));
  EXPECT_EQ(parts.vocab.size(), 259u);
  // With min_frequency 1 it goes on until one symbol is left: 4 more merges (each removes one symbol).
  EXPECT_EQ(learn_bpe({{"aaabdaaabac", 1}}, config_with(1000, 1)).merges.size(), 3u + 4u);
}

TEST(BpeTrainer, IdLayoutIsSpecialsThenByteLevelOrderThenMerges) {
  BpeParts parts = learn_bpe({{"hello", 3}}, config_with(260, 1, {"<|endoftext|>", "<pad>"}));
  ASSERT_EQ(parts.added_tokens.size(), 2u);
  EXPECT_EQ(parts.added_tokens[0].content, "<|endoftext|>");
  EXPECT_EQ(parts.added_tokens[0].id, 0);
  EXPECT_TRUE(parts.added_tokens[0].special);
  EXPECT_EQ(parts.added_tokens[1].id, 1);
  EXPECT_EQ(parts.vocab[0], "<|endoftext|>");
  EXPECT_EQ(parts.vocab[1], "<pad>");
  // GPT-2's order: '!' (0x21) is the first byte, 'a' the 65th, 0xFF the 188th, then 0x00, ..., 0x20 (space).
  EXPECT_EQ(parts.vocab[2], "!");
  EXPECT_EQ(parts.vocab[2 + 64], "a");
  EXPECT_EQ(parts.vocab[2 + 187], "\xff");
  EXPECT_EQ(parts.vocab[2 + 188], std::string(1, '\0'));
  EXPECT_EQ(parts.vocab[2 + 188 + 32], " ");
  EXPECT_EQ(parts.vocab[2 + 255], "\xad");
  // hello: he, el, ll, lo all occur 3 times; (e, l) has the smallest ids (e 70, h 73, l 77, o 80), then
  // (h, el) = (73, 258) beats (l, o) = (77, 80).
  ASSERT_EQ(parts.vocab.size(), 260u);
  EXPECT_EQ(parts.merges, (Merges{{"e", "l"}, {"h", "el"}}));
  EXPECT_EQ(parts.vocab[258], "el");
  EXPECT_EQ(parts.vocab[259], "hel");
}

TEST(BpeTrainer, TiesGoToSmallerIdsNotSmallerBytes) {
  // "a " < "ab" as bytes, but the space's id (220) is larger than 'b''s (65): (a, b) is merged first.
  BpeParts parts = learn_bpe({{"a ", 2}, {"ab", 2}}, config_with(257));
  EXPECT_EQ(parts.merges, (Merges{{"a", "b"}}));
}

TEST(BpeTrainer, CountsOverlappingRunsLikeTheEncoderMerges) {
  // "aaa" x5: (a, a) counts 10 (two overlapping positions) but merges once per word, leaving (aa, a).
  BpeParts parts = learn_bpe({{"aaa", 5}, {"aaaa", 1}}, config_with(1000, 1));
  // aaaa -> [aa, aa] -> (aa, aa); aaa -> [aa, a] x5 -> (aa, a) is the more frequent.
  EXPECT_EQ(parts.merges, (Merges{{"a", "a"}, {"aa", "a"}, {"aa", "aa"}}));
}

TEST(BpeTrainer, NeverLearnsASpecialToken) {
  // "ab" is a special token, so the text "ab" must not merge into its id: (c, d) is learned instead.
  BpeParts parts = learn_bpe({{"ab", 3}, {"cd", 2}}, config_with(300, 1, {"ab"}));
  EXPECT_EQ(parts.merges, (Merges{{"c", "d"}}));
  EXPECT_EQ(parts.vocab.size(), 258u);
  EXPECT_EQ(parts.vocab[257], "cd");
}

TEST(BpeTrainer, WeighsPiecesByTheirCounts) {
  // "xy" once but "zw" 5 times: zw first even though xy sorts first.
  BpeParts parts = learn_bpe({{"xy", 1}, {"zw", 5}}, config_with(257));
  EXPECT_EQ(parts.merges, (Merges{{"z", "w"}}));
}

// The same training done the slow way: recount every pair from scratch before each merge.
BpeParts learn_by_recounting(const PieceCounts& pieces, const BpeTrainerConfig& config) {
  BpeParts parts;
  parts.vocab = config.special_tokens;
  for (int b = 0; b < 512; ++b) {  // printable bytes first, then the rest (GPT-2's byte-level order)
    int byte = b % 256;
    bool printable = (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || byte >= 174;
    if (printable == (b < 256)) parts.vocab.push_back(std::string(1, static_cast<char>(byte)));
  }
  std::map<std::string, std::uint32_t> ids;
  for (std::uint32_t i = 0; i < parts.vocab.size(); ++i) ids.emplace(parts.vocab[i], i);
  std::vector<std::vector<std::uint32_t>> words;
  std::vector<std::int64_t> counts;
  for (const auto& [piece, count] : pieces) {
    std::vector<std::uint32_t> symbols;
    for (char c : piece) symbols.push_back(ids.at(std::string(1, c)));
    words.push_back(symbols);
    counts.push_back(static_cast<std::int64_t>(count));
  }
  std::set<std::pair<std::uint32_t, std::uint32_t>> merged_before;
  while (static_cast<std::int64_t>(parts.vocab.size()) < config.vocab_size) {
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::int64_t> pair_counts;
    for (std::size_t w = 0; w < words.size(); ++w)
      for (std::size_t i = 0; i + 1 < words[w].size(); ++i) pair_counts[{words[w][i], words[w][i + 1]}] += counts[w];
    std::pair<std::uint32_t, std::uint32_t> best{};
    std::int64_t best_count = 0;
    for (const auto& [pair, count] : pair_counts)  // map order: the first of equal counts has the smallest ids
      if (count > best_count) best = pair, best_count = count;
    if (best_count < std::max<std::int64_t>(1, config.min_frequency)) break;
    std::string token = parts.vocab[best.first] + parts.vocab[best.second];
    auto [it, added] = ids.emplace(token, static_cast<std::uint32_t>(parts.vocab.size()));
    if (added) parts.vocab.push_back(token);
    if (merged_before.insert(best).second) parts.merges.emplace_back(parts.vocab[best.first], parts.vocab[best.second]);
    for (auto& word : words) {
      std::vector<std::uint32_t> out;
      for (std::size_t i = 0; i < word.size();) {
        if (i + 1 < word.size() && word[i] == best.first && word[i + 1] == best.second) {
          out.push_back(it->second);
          i += 2;
        } else {
          out.push_back(word[i++]);
        }
      }
      word = out;
    }
  }
  return parts;
}

TEST(BpeTrainer, IncrementalCountsMatchARecountFromScratch) {
  // Small alphabets make many ties, overlapping runs and tokens reachable by two merge paths (ab+c, a+bc).
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    std::string alphabet = trial % 2 ? "abc" : "ab c";
    std::uniform_int_distribution<int> letter(0, static_cast<int>(alphabet.size()) - 1), length(1, 9), count(1, 4);
    std::map<std::string, std::uint64_t> bag;
    int distinct = 1 + trial % 40;
    for (int w = 0; w < distinct; ++w) {
      std::string piece;
      for (int n = length(rng); n > 0; --n) piece += alphabet[letter(rng)];
      bag[piece] += count(rng);
    }
    PieceCounts pieces(bag.begin(), bag.end());
    auto config = config_with(256 + 40, trial % 3, trial % 4 ? std::vector<std::string>{"<s>"} : std::vector<std::string>{});
    BpeParts fast = learn_bpe(pieces, config);
    BpeParts slow = learn_by_recounting(pieces, config);
    ASSERT_EQ(fast.merges, slow.merges) << "trial " << trial;
    ASSERT_EQ(fast.vocab, slow.vocab) << "trial " << trial;
  }
}

TEST(BpeTrainer, RefusesAVocabularyTooSmallForTheAlphabet) {
  auto message = error_of([] { learn_bpe({{"ab", 5}}, config_with(256, 2, {"<|endoftext|>"})); });
  EXPECT_NE(message.find("vocab_size 256 is too small"), std::string::npos) << message;
  EXPECT_NE(message.find("at least 257"), std::string::npos) << message;
  // Exactly specials + 256 is allowed: no merges.
  BpeParts parts = learn_bpe({{"ab", 5}}, config_with(257, 2, {"<|endoftext|>"}));
  EXPECT_TRUE(parts.merges.empty());
  EXPECT_EQ(parts.vocab.size(), 257u);
}

TEST(BpeTrainer, RefusesEmptyInput) {
  auto message = error_of([] { learn_bpe({}, config_with(300)); });
  EXPECT_NE(message.find("no text to learn from"), std::string::npos) << message;
  message = error_of([] { learn_bpe({{"", 3}}, config_with(300)); });
  EXPECT_NE(message.find("no text to learn from"), std::string::npos) << message;
}

TEST(BpeTrainer, RefusesBadSpecialTokens) {
  EXPECT_NE(error_of([] { learn_bpe({{"ab", 1}}, config_with(300, 1, {"<a>", "<a>"})); }).find("listed twice"),
            std::string::npos);
  EXPECT_NE(error_of([] { learn_bpe({{"ab", 1}}, config_with(300, 1, {""})); }).find("empty special token"),
            std::string::npos);
  EXPECT_NE(error_of([] { learn_bpe({{"ab", 1}}, config_with(300, 1, {"!"})); }).find("single byte"),
            std::string::npos);
  EXPECT_NE(error_of([] { learn_bpe({{"ab", 1}}, config_with(300, 1, {"\xc4\xa0\xc4\xa0"})); })  // "ĠĠ"
                .find("byte-level symbols"),
            std::string::npos);
  EXPECT_NE(error_of([] { learn_bpe({{"ab", 1}}, config_with(300, 1, {"a\xff"})); }).find("not valid UTF-8"),
            std::string::npos);
}

// ---- pre-tokenizing and counting ------------------------------------------------------------------------

std::map<std::string, std::uint64_t> as_map(const PieceCounts& counts) { return {counts.begin(), counts.end()}; }

TEST(BpeTrainerInput, CountsGpt2PiecesAcrossDocuments) {
  PieceCounts counts = count_pieces({"Hello world, hello world", "world's end\n\n"}, std::string(kGpt2Pattern), 2);
  std::map<std::string, std::uint64_t> expected{{"Hello", 1}, {" world", 2}, {",", 1},  {" hello", 1},
                                                {"world", 1}, {"'s", 1},     {" end", 1}, {"\n\n", 1}};
  EXPECT_EQ(as_map(counts), expected);
  EXPECT_TRUE(std::is_sorted(counts.begin(), counts.end()));
}

TEST(BpeTrainerInput, ReadsTxtFilesInPathOrderAndStopsAtMaxBytes) {
  test::TempDir dir;
  std::filesystem::create_directories(dir / "d" / "sub");
  test::write_text(dir / "d" / "b.txt", "bbbb");
  test::write_text(dir / "d" / "a.txt", "aa \xc3\xa9");  // "aa é": 5 bytes
  test::write_text(dir / "d" / "sub" / "c.txt", "cc");
  test::write_text(dir / "d" / "notes.md", "not text for training");
  auto files = training_text_files(dir / "d");
  EXPECT_EQ(files, (std::vector<std::filesystem::path>{dir / "d" / "a.txt", dir / "d" / "b.txt", dir / "d" / "sub" / "c.txt"}));
  using Docs = std::vector<std::string_view>;
  auto all = read_training_text(dir / "d");
  EXPECT_EQ(all.documents, (Docs{"aa \xc3\xa9", "bbbb", "cc"}));
  EXPECT_EQ(all.bytes, 11u);
  auto within_first = read_training_text(dir / "d", 4);  // byte 4 is inside 'é': cut before it, read no more
  EXPECT_EQ(within_first.documents, (Docs{"aa "}));
  EXPECT_EQ(within_first.bytes, 3u);
  auto into_second = read_training_text(dir / "d", 7);
  EXPECT_EQ(into_second.documents, (Docs{"aa \xc3\xa9", "bb"}));
  EXPECT_EQ(read_training_text(dir / "d" / "b.txt").documents, (Docs{"bbbb"}));
  EXPECT_NE(error_of([&] { training_text_files(dir / "missing"); }).find("does not exist"), std::string::npos);
  std::filesystem::create_directories(dir / "empty");
  EXPECT_NE(error_of([&] { training_text_files(dir / "empty"); }).find("holds no *.txt files"), std::string::npos);
}

std::filesystem::path corpus_path() {
  const char* cache = std::getenv("DEW_CACHE");
  const char* home = std::getenv("HOME");
  std::filesystem::path root = cache ? std::filesystem::path(cache) : std::filesystem::path(home ? home : "") / ".cache/dew";
  return root / "data" / "austen.txt";
}

std::string read_corpus() {
  auto path = corpus_path();
  if (!std::filesystem::exists(path))
    throw std::runtime_error(path.string() + " is missing: the trainer fixtures are slices of it; run scripts/setup.sh");
  return test::read_text(path);
}

TEST(BpeTrainerInput, CuttingLargeDocumentsIntoChunksKeepsEveryPiece) {
  // The whole corpus (4 MB) is counted in 1 MiB chunks on several threads; counting it in one pass with
  // the pre-tokenizer itself must give the same table.
  std::string corpus = read_corpus();
  ASSERT_GT(corpus.size(), 3u << 20);
  PieceCounts chunked = count_pieces({corpus}, std::string(kGpt2Pattern), 3);
  std::map<std::string, std::uint64_t> whole;
  PreTokenizer({std::string(kGpt2Pattern)}).for_each_piece(corpus, [&](std::string_view piece) { ++whole[std::string(piece)]; });
  EXPECT_EQ(as_map(chunked), whole);
}

// ---- a tokenizer trained on the Austen corpus, against Hugging Face `tokenizers` ----------------------

using Json = nlohmann::json;

Json expected_json() {
  return Json::parse(test::read_text(test::fixtures() / "trained_bpe" / "expected.json"));
}

// The bytes of a corpus slice the fixture names, checked against its sha256.
std::string corpus_slice(const Json& slice) {
  std::string corpus = read_corpus();
  auto offset = slice["offset"].get<std::size_t>(), length = slice["length"].get<std::size_t>();
  if (offset + length > corpus.size())
    throw std::runtime_error(corpus_path().string() + " is shorter than the fixtures expect: not the corpus they were made from");
  std::string text = corpus.substr(offset, length);
  if (dew::sha256_hex(text) != slice["sha256"].get<std::string>())
    throw std::runtime_error(corpus_path().string() + " differs from the corpus the fixtures were made from (sha256 of bytes " +
                             std::to_string(offset) + ".." + std::to_string(offset + length) + ")");
  return text;
}

TEST(BpeTrainerFixture, Sha256MatchesKnownDigests) {
  EXPECT_EQ(dew::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(dew::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(dew::sha256_hex(std::string(1000, 'a')),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(BpeTrainerFixture, RetrainingReproducesTheCommittedTokenizerJson) {
  Json expected = expected_json();
  std::string text = corpus_slice(expected["train"]);
  BpeTrainerConfig config;
  config.vocab_size = expected["train"]["vocab_size"].get<std::int64_t>();
  config.min_frequency = expected["train"]["min_frequency"].get<std::int64_t>();
  config.special_tokens = expected["train"]["special_tokens"].get<std::vector<std::string>>();
  BpeParts parts = train_bpe({text}, config);
  EXPECT_EQ(parts.vocab.size(), 2000u);
  EXPECT_EQ(parts.merges.size(), 2000u - 257u);
  BpeTokenizer tokenizer(std::move(parts));
  test::TempDir dir;
  EXPECT_EQ(tokenizer.save(dir.path()), "tokenizer.json");
  std::string ours = test::read_text(dir / "tokenizer.json");
  std::string committed = test::read_text(test::fixtures() / "trained_bpe" / "tokenizer.json");
  EXPECT_EQ(ours.size(), committed.size());
  EXPECT_TRUE(ours == committed) << "training on the fixture slice no longer gives the committed tokenizer.json";
}

TEST(BpeTrainerFixture, EncodesExactlyAsHuggingFaceTokenizersDoes) {
  Json expected = expected_json();
  auto tokenizer = load_tokenizer((test::fixtures() / "trained_bpe" / "tokenizer.json").string());
  EXPECT_EQ(tokenizer->vocab_size(), 2000);
  EXPECT_EQ(tokenizer->eos_id(), std::optional<TokenId>(0));  // <|endoftext|>, the first special token
  ASSERT_GE(expected["cases"].size(), 20u);
  for (const auto& item : expected["cases"]) {
    std::string text = item["text"].get<std::string>();
    auto plain = item["plain"].get<std::vector<TokenId>>();
    auto special = item["special"].get<std::vector<TokenId>>();
    EXPECT_EQ(tokenizer->encode(text, false), plain) << "text: " << text;
    EXPECT_EQ(tokenizer->encode(text, true), special) << "text: " << text;
    EXPECT_EQ(tokenizer->decode(special), text);
  }
  std::string prose = corpus_slice(expected["prose"]);
  auto ids = expected["prose"]["ids"].get<std::vector<TokenId>>();
  ASSERT_GT(ids.size(), 20000u);
  EXPECT_TRUE(tokenizer->encode(prose) == ids) << "the 100 KB prose slice encodes differently";
  EXPECT_EQ(tokenizer->decode(ids), prose);
}

}  // namespace
}  // namespace dew::data
