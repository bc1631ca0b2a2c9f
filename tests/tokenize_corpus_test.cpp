#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "dew/core/error.h"
#include "dew/data/token_files.h"
#include "dew/data/tokenize.h"
#include "test_support.h"
#include "token_test_support.h"

using dew::test::error_of;

namespace {
using namespace dew::data;
using dew::test::read_text;
using dew::test::TempDir;
using dew::test::write_text;
using dew::test::MergingTestTokenizer;
namespace fs = std::filesystem;

TokenizeConfig config_for(const fs::path& input, const fs::path& out, double val_fraction = 0.0) {
  TokenizeConfig c;
  c.input = input.string();
  c.out = out.string();
  c.tokenizer = "byte";
  c.val_fraction = val_fraction;
  c.threads = 1;
  return c;
}

// Names in a directory, hidden temporaries included: a failed run must leave nothing behind.
std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::int64_t> read_ids(const fs::path& dir, Split split) {
  TokenFiles files(dir);
  TokenArray a = files.split(split);
  std::vector<std::int64_t> ids;
  for (std::int64_t i = 0; i < a.size(); ++i) ids.push_back(a[i]);
  return ids;
}

TEST(Tokenize, ByteTokensAreTheBytesAndValidationIsTheHead) {
  TempDir dir;
  write_text(dir / "corpus.txt", "A small corpus for a tokenizer demonstration.\n");  // 46 bytes
  auto s = tokenize_corpus(config_for(dir / "corpus.txt", dir / "tokens", 0.1));
  EXPECT_EQ(s.documents, 1);
  EXPECT_EQ(s.val_tokens, 5);  // round(4.6)
  EXPECT_EQ(s.train_tokens, 41);
  EXPECT_EQ(s.input_bytes, 46u);
  EXPECT_EQ(read_text(dir / "tokens/val.bin"), "A sma");
  EXPECT_EQ(read_text(dir / "tokens/train.bin"), "ll corpus for a tokenizer demonstration.\n");
  TokenMeta meta = read_token_meta(dir / "tokens");
  EXPECT_EQ(meta.tokenizer, "byte");
  EXPECT_EQ(meta.tokenizer_source, "byte");
  EXPECT_EQ(meta.vocab_size, 256);
  EXPECT_EQ(meta.dtype, TokenDtype::uint8);
  EXPECT_EQ(meta.train_tokens, 41);
  EXPECT_EQ(meta.val_tokens, 5);
  EXPECT_FALSE(meta.eos_id.has_value());
  EXPECT_FALSE(meta.packed);
  EXPECT_EQ(meta.documents, 1);
  EXPECT_EQ(load_token_tokenizer(dir / "tokens", meta)->name(), "byte");
  EXPECT_TRUE(fs::exists(dir / "tokens/tokenizer.txt"));  // the directory is a tokenizer spec by itself
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"corpus.txt", "tokens"}));
  EXPECT_EQ(entries(dir / "tokens"), (std::vector<std::string>{"meta.json", "tokenizer.txt", "train.bin", "val.bin"}));
}

TEST(Tokenize, DirectoryReadsEveryTxtInSortedPathOrder) {
  TempDir dir;
  fs::create_directories(dir / "in/b");
  write_text(dir / "in/b/2.txt", "two");
  write_text(dir / "in/a.txt", "one ");
  write_text(dir / "in/b/1.txt", "mid ");
  write_text(dir / "in/c.md", "not text");
  write_text(dir / "in/empty.txt", "");
  auto s = tokenize_corpus(config_for(dir / "in", dir / "out"));
  EXPECT_EQ(s.documents, 3);  // the empty file adds no document
  EXPECT_EQ(read_text(dir / "out/train.bin"), "one mid two");
  EXPECT_EQ(read_text(dir / "out/val.bin"), "");
  EXPECT_EQ(read_token_meta(dir / "out").documents, 3);
}

TEST(Tokenize, PackAppendsEosAfterEveryDocument) {
  TempDir dir;
  fs::create_directories(dir / "in");
  write_text(dir / "in/1.txt", "the cat");
  write_text(dir / "in/2.txt", "a moth");
  MergingTestTokenizer tokenizer;
  auto c = config_for(dir / "in", dir / "out", 0.25);
  c.pack = true;
  c.tokenizer = "merging-test";
  auto s = tokenize_corpus(c, tokenizer);
  // "the cat" -> th e ' ' c a t EOS (7 ids); "a moth" -> a ' ' m o th EOS (6 ids); 13 in all, val = round(3.25).
  std::vector<std::int64_t> stream{256, 'e', ' ', 'c', 'a', 't', 257, 'a', ' ', 'm', 'o', 256, 257};
  EXPECT_EQ(s.val_tokens, 3);
  EXPECT_EQ(s.train_tokens, 10);
  EXPECT_EQ(read_ids(dir / "out", Split::val), std::vector<std::int64_t>(stream.begin(), stream.begin() + 3));
  EXPECT_EQ(read_ids(dir / "out", Split::train), std::vector<std::int64_t>(stream.begin() + 3, stream.end()));
  TokenMeta meta = read_token_meta(dir / "out");
  EXPECT_EQ(meta.dtype, TokenDtype::uint16);
  EXPECT_EQ(meta.eos_id, 257);
  EXPECT_TRUE(meta.packed);
  EXPECT_EQ(meta.tokenizer, "merging-test.txt");
  EXPECT_EQ(meta.tokenizer_source, "merging-test");
  EXPECT_TRUE(fs::exists(dir / "out/merging-test.txt"));
  EXPECT_EQ(read_text(dir / "out/train.bin").size(), 20u);  // 10 uint16 ids
}

TEST(Tokenize, PackRefusesATokenizerWithoutEos) {
  TempDir dir;
  write_text(dir / "c.txt", "text");
  auto c = config_for(dir / "c.txt", dir / "out");
  c.pack = true;
  auto msg = error_of([&] { tokenize_corpus(c); });
  EXPECT_NE(msg.find("--pack needs a tokenizer with an end-of-sequence id, and 'byte' has none"), std::string::npos) << msg;
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"c.txt"}));
}

// Blocks of a few bytes force many cuts; the tokenizer merges "th", so a cut between 't' and 'h' would
// change the ids. Words longer than a block (no safe cut) must wait for the next block.
TEST(Tokenize, StreamingInBlocksEqualsEncodingTheWhole) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 300; ++i) text += (i % 7 == 0) ? "thththththththththth " : "the other thing with them ";
  write_text(dir / "big.txt", text);
  MergingTestTokenizer tokenizer;
  std::vector<TokenId> whole = tokenizer.encode(text);
  ASSERT_LT(whole.size(), text.size());  // merges happened
  for (std::int64_t block : {3, 7, 64, 1000, 1 << 20}) {
    auto c = config_for(dir / "big.txt", dir / "out", 0.01);
    c.block_bytes = block;
    auto s = tokenize_corpus(c, tokenizer);
    std::vector<std::int64_t> got = read_ids(dir / "out", Split::val);
    auto train = read_ids(dir / "out", Split::train);
    got.insert(got.end(), train.begin(), train.end());
    ASSERT_EQ(got, std::vector<std::int64_t>(whole.begin(), whole.end())) << "block_bytes " << block;
    EXPECT_EQ(s.val_tokens, std::llround(0.01 * static_cast<double>(whole.size())));
  }
}

TEST(Tokenize, StreamedByteCorpusMatchesItsBytesAcrossThreads) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "line " + std::to_string(i * 7919 % 10007) + " of a longer input\n";
  write_text(dir / "big.txt", text);
  auto c = config_for(dir / "big.txt", dir / "out", 0.02);
  c.block_bytes = 4096;
  c.threads = 2;
  auto s = tokenize_corpus(c);
  auto val = static_cast<std::size_t>(std::llround(0.02 * static_cast<double>(text.size())));
  EXPECT_EQ(s.val_tokens, static_cast<std::int64_t>(val));
  EXPECT_EQ(read_text(dir / "out/val.bin"), text.substr(0, val));
  EXPECT_EQ(read_text(dir / "out/train.bin"), text.substr(val));
}

TEST(Tokenize, RerunReplacesAndFailedRunLeavesTheOldOutput) {
  TempDir dir;
  write_text(dir / "a.txt", "first version");
  tokenize_corpus(config_for(dir / "a.txt", dir / "out"));
  EXPECT_EQ(read_text(dir / "out/train.bin"), "first version");
  write_text(dir / "a.txt", "second");
  tokenize_corpus(config_for(dir / "a.txt", dir / "out"));
  EXPECT_EQ(read_text(dir / "out/train.bin"), "second");

  write_text(dir / "empty.txt", "");
  auto bad = config_for(dir / "empty.txt", dir / "out");
  auto msg = error_of([&] { tokenize_corpus(bad); });
  EXPECT_NE(msg.find("empty.txt' holds no text"), std::string::npos) << msg;
  EXPECT_EQ(read_text(dir / "out/train.bin"), "second");  // untouched
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"a.txt", "empty.txt", "out"}));
}

TEST(Tokenize, BadInputsGetClearErrorsAndNoOutput) {
  TempDir dir;
  write_text(dir / "one.txt", "x");
  fs::create_directories(dir / "notext");
  write_text(dir / "notext/readme.md", "hello");
  struct Case {
    TokenizeConfig config;
    std::string expected;
  };
  std::vector<Case> cases{
      {config_for(dir / "missing.txt", dir / "out"), "input '" + (dir / "missing.txt").string() + "' does not exist"},
      {config_for(dir / "notext", dir / "out"), "notext' holds no *.txt files"},
      {config_for(dir / "one.txt", dir / "out", 1.0), "val_fraction 1 is outside [0, 1)"},
      {config_for(dir / "one.txt", dir / "out", -0.1), "val_fraction -0.1 is outside [0, 1)"},
      {config_for(dir / "one.txt", dir / "out", 0.6), "val_fraction 0.6 of 1 tokens leaves no training tokens"},
      {config_for(dir / "one.txt", dir.path()), "holds the input"},
      {config_for(dir / "one.txt", dir / "notext"), "is not a token directory (no meta.json)"},
  };
  for (auto& c : cases) {
    auto msg = error_of([&] { tokenize_corpus(c.config); });
    EXPECT_NE(msg.find(c.expected), std::string::npos) << "expected: " << c.expected << "\ngot: " << msg;
    EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"notext", "one.txt"})) << c.expected;
  }
  EXPECT_EQ(entries(dir / "notext"), (std::vector<std::string>{"readme.md"}));
}

TEST(Tokenize, UnreadableInputIsNamed) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads files whatever their mode";
  TempDir dir;
  write_text(dir / "secret.txt", "x");
  fs::permissions(dir / "secret.txt", fs::perms::none);
  auto msg = error_of([&] { tokenize_corpus(config_for(dir / "secret.txt", dir / "out")); });
  EXPECT_NE(msg.find("cannot read input"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir / "out"));
}

TEST(Tokenize, UnreadableDirectoryEntryIsNamed) {
  TempDir dir;
  fs::create_directories(dir / "in");
  // A dangling *.txt link: listed as input, impossible to read.
  fs::create_symlink(dir / "nowhere.txt", dir / "in/broken.txt");
  write_text(dir / "in/fine.txt", "x");
  auto msg = error_of([&] { tokenize_corpus(config_for(dir / "in", dir / "out")); });
  EXPECT_NE(msg.find("cannot read input '" + (dir / "in/broken.txt").string() + "'"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir / "out"));
}

// GPT-2's tokenizer is bundled (assets/tokenizers/gpt2): failing to load it is a failure, not a skip.
TEST(Tokenize, Gpt2FromTheBundledAssets) {
  std::unique_ptr<Tokenizer> gpt2;
  ASSERT_NO_THROW(gpt2 = load_tokenizer("gpt2")) << error_of([] { load_tokenizer("gpt2"); });
  TempDir dir;
  fs::create_directories(dir / "in");
  write_text(dir / "in/1.txt", "Hello world");
  write_text(dir / "in/2.txt", "Hello, world!");
  auto c = config_for(dir / "in", dir / "out");
  c.tokenizer = "gpt2";
  c.pack = true;
  tokenize_corpus(c);
  EXPECT_EQ(read_ids(dir / "out", Split::train), (std::vector<std::int64_t>{15496, 995, 50256, 15496, 11, 995, 0, 50256}));
  TokenMeta meta = read_token_meta(dir / "out");
  EXPECT_EQ(meta.vocab_size, 50257);
  EXPECT_EQ(meta.dtype, TokenDtype::uint16);
  EXPECT_EQ(meta.eos_id, 50256);
  EXPECT_EQ(meta.tokenizer_source, "gpt2");
  auto back = load_token_tokenizer(dir / "out", meta);
  EXPECT_EQ(back->vocab_size(), 50257);
  EXPECT_EQ(back->encode("Hello world"), (std::vector<TokenId>{15496, 995}));

  // Streaming in 1 KB blocks gives GPT-2's ids for the whole text (spaces, newlines, digits, UTF-8).
  std::string text;
  for (int i = 0; i < 400; ++i) {
    text += "It's " + std::to_string(1990 + i) + ":  naïve café — déjà vu 🦄\n\n   The quick brown fox, said she.\n";
  }
  write_text(dir / "long.txt", text);
  auto streamed = config_for(dir / "long.txt", dir / "long", 0.0);
  streamed.block_bytes = 1024;
  tokenize_corpus(streamed, *gpt2);
  std::vector<TokenId> whole = gpt2->encode(text);
  EXPECT_EQ(read_ids(dir / "long", Split::train), std::vector<std::int64_t>(whole.begin(), whole.end()));
}

}  // namespace
