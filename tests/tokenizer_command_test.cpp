// `dew tokenizer train|encode|decode` end to end, through the built binary.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "dew/data/tokenizers/bpe_trainer.h"
#include "test_support.h"

namespace dew::test {
namespace {
namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

CommandResult dew(const std::string& arguments) { return run_command(quote(dew_binary().string()) + " " + arguments); }

fs::path trained_fixture() { return fixtures() / "trained_bpe" / "tokenizer.json"; }

std::string austen_slice(std::size_t offset, std::size_t length) {
  const char* cache = std::getenv("DEW_CACHE");
  const char* home = std::getenv("HOME");
  fs::path corpus = (cache ? fs::path(cache) : fs::path(home ? home : "") / ".cache/dew") / "data" / "austen.txt";
  if (!fs::exists(corpus)) throw std::runtime_error(corpus.string() + " is missing: run scripts/setup.sh");
  return read_text(corpus).substr(offset, length);
}

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

TEST(TokenizerCommand, TrainWritesTheFixtureTokenizerFromTheSameSlice) {
  // The settings of tools/reference/make_trained_tokenizer_fixtures.py.
  TempDir dir;
  write_text(dir / "train.txt", austen_slice(0, 400000));
  auto result = dew("tokenizer train --input " + quote((dir / "train.txt").string()) + " --out " +
                    quote((dir / "out").string()) + " --vocab-size 2000 --min-frequency 2");
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("learned 1743 merges, vocabulary 2000"), std::string::npos) << result.output;
  EXPECT_EQ(names_in(dir / "out"), (std::set<std::string>{"tokenizer.json", "tokenizer_config.json"}));
  EXPECT_TRUE(read_text(dir / "out" / "tokenizer.json") == read_text(trained_fixture()));
}

TEST(TokenizerCommand, TrainReadsEveryTxtFileUnderADirectory) {
  TempDir dir;
  fs::create_directories(dir / "corpus" / "part");
  std::string first = austen_slice(0, 30000), second = austen_slice(500000, 30000);
  write_text(dir / "corpus" / "a.txt", first);
  write_text(dir / "corpus" / "part" / "b.txt", second);
  write_text(dir / "corpus" / "notes.md", std::string(5000, 'z') + " qqqq qqqq qqqq");  // not *.txt: ignored
  auto result = dew("tokenizer train --input " + quote((dir / "corpus").string()) + " --out " +
                    quote((dir / "out").string()) + " --vocab-size 600");
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("from 2 file(s)"), std::string::npos) << result.output;
  data::BpeTrainerConfig config;
  config.vocab_size = 600;
  data::BpeTokenizer expected(data::train_bpe({first, second}, config));
  expected.save(dir / "expected");
  EXPECT_TRUE(read_text(dir / "out" / "tokenizer.json") == read_text(dir / "expected" / "tokenizer.json"));
}

TEST(TokenizerCommand, TrainTakesAConfigFileAndSetOverrides) {
  TempDir dir;
  write_text(dir / "train.txt", austen_slice(100000, 50000));
  write_text(dir / "trainer.json", R"({"vocab_size": 300, "special_tokens": ["<s>", "</s>"], "min_frequency": 5})");
  auto result = dew("tokenizer train --input " + quote((dir / "train.txt").string()) + " --out " +
                    quote((dir / "out").string()) + " --config " + quote((dir / "trainer.json").string()) +
                    " --set vocab_size=320");
  ASSERT_EQ(result.status, 0) << result.output;
  Json written = Json::parse(read_text(dir / "out" / "tokenizer.json"));
  EXPECT_EQ(written["model"]["vocab"].size(), 320u);
  EXPECT_EQ(written["model"]["vocab"]["<s>"], 0);
  EXPECT_EQ(written["model"]["vocab"]["</s>"], 1);
  EXPECT_EQ(written["model"]["vocab"]["!"], 2);
  EXPECT_EQ(written["model"]["merges"].size(), 320u - 258u);
  ASSERT_EQ(written["added_tokens"].size(), 2u);
  EXPECT_EQ(written["added_tokens"][1]["content"], "</s>");
  EXPECT_EQ(written["added_tokens"][1]["special"], true);
}

TEST(TokenizerCommand, TrainRefusesBadInputClearly) {
  TempDir dir;
  write_text(dir / "train.txt", "some text to learn from, some text");
  write_text(dir / "empty.txt", "");
  std::string out = " --out " + quote((dir / "out").string());
  auto small = dew("tokenizer train --input " + quote((dir / "train.txt").string()) + out + " --vocab-size 100");
  EXPECT_EQ(small.status, 1);
  EXPECT_NE(small.output.find("vocab_size 100 is too small"), std::string::npos) << small.output;
  EXPECT_NE(small.output.find("at least 257"), std::string::npos) << small.output;

  auto empty = dew("tokenizer train --input " + quote((dir / "empty.txt").string()) + out);
  EXPECT_EQ(empty.status, 1);
  EXPECT_NE(empty.output.find("no text to learn from"), std::string::npos) << empty.output;
  EXPECT_NE(empty.output.find("empty.txt"), std::string::npos) << empty.output;

  auto missing = dew("tokenizer train --input " + quote((dir / "nope.txt").string()) + out);
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.output.find("nope.txt' does not exist"), std::string::npos) << missing.output;

  auto unknown = dew("tokenizer train --input " + quote((dir / "train.txt").string()) + out + " --set vocab=300");
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.output.find("vocab"), std::string::npos) << unknown.output;
  EXPECT_FALSE(fs::exists(dir / "out" / "tokenizer.json"));
}

TEST(TokenizerCommand, EncodeAndDecodeWithATrainedTokenizer) {
  // Ids from Hugging Face `tokenizers` (tests/fixtures/trained_bpe/expected.json).
  std::string spec = quote(trained_fixture().string());
  auto encoded = dew("tokenizer encode --tokenizer " + spec + " --text 'Hello world'");
  ASSERT_EQ(encoded.status, 0) << encoded.output;
  EXPECT_EQ(encoded.output, "40 686 79 977\n");
  auto special = dew("tokenizer encode --tokenizer " + spec + " --allow-special --text '<|endoftext|>'");
  EXPECT_EQ(special.output, "0\n");
  auto decoded = dew("tokenizer decode --tokenizer " + spec + " 40 686 79 977 0");
  ASSERT_EQ(decoded.status, 0) << decoded.output;
  EXPECT_EQ(decoded.output, "Hello world<|endoftext|>\n");
  auto bad = dew("tokenizer decode --tokenizer " + spec + " 40 5000");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.output.find("5000"), std::string::npos) << bad.output;
}

std::string joined(const Json& ids) {
  std::string line;
  for (const Json& id : ids) line += (line.empty() ? "" : " ") + std::to_string(id.get<int>());
  return line + "\n";
}

// Each tokenizer.json pipeline fixture (Llama 2 / Mistral SentencePiece BPE, T5 Unigram, BERT WordPiece,
// Qwen 2 NFC + ByteLevel) through `dew tokenizer encode/decode`: ids as Hugging Face `tokenizers` gives them
// (tests/fixtures/pipeline_tokenizers/*/cases.json), without and with the post-processor's special tokens.
TEST(TokenizerCommand, EncodeAndDecodeWithEachPipelineFixture) {
  for (const char* name : {"llama2_spm", "mistral_spm", "t5_unigram", "bert_wordpiece", "qwen2_bytelevel"}) {
    fs::path dir = fixtures() / "pipeline_tokenizers" / name;
    Json cases = Json::parse(read_text(dir / "cases.json"));
    for (int index : {2, 10, 16}) {  // "Hello world", accents, full-width and ligatures
      const Json& c = cases.at(index);
      std::string text = c["text"];
      std::string spec = "--tokenizer " + quote(dir.string()) + " --allow-special --text " + quote(text);
      auto encoded = dew("tokenizer encode " + spec);
      ASSERT_EQ(encoded.status, 0) << name << ": " << encoded.output;
      EXPECT_EQ(encoded.output, joined(c["ids"])) << name << ": " << text;
      auto with_special = dew("tokenizer encode --add-special-tokens " + spec);
      EXPECT_EQ(with_special.output, joined(c["ids_with_special"])) << name << ": " << text;
      std::string ids = joined(c["ids"]);
      ids.pop_back();
      auto decoded = dew("tokenizer decode --tokenizer " + quote(dir.string()) + " " + ids);
      ASSERT_EQ(decoded.status, 0) << name << ": " << decoded.output;
      EXPECT_EQ(decoded.output, c["decoded"].get<std::string>() + "\n") << name;
    }
  }
}

}  // namespace
}  // namespace dew::test
