#include <gtest/gtest.h>

#include <filesystem>

#include "dew/data/token_files.h"
#include "test_support.h"

namespace {
using dew::test::read_text;
using dew::test::run_command;
using dew::test::TempDir;
using dew::test::write_text;
namespace fs = std::filesystem;

std::string dew_cmd(const std::string& args) { return "'" + dew::test::dew_binary().string() + "' " + args; }

TEST(TokenizeCommand, WritesTheTokenDirectoryAndASummary) {
  TempDir dir;
  write_text(dir / "corpus.txt", "A small corpus for a tokenizer demonstration.\n");
  auto r = run_command(dew_cmd("tokenize --input '" + (dir / "corpus.txt").string() + "' --out '" +
                               (dir / "corpus-byte").string() + "' --tokenizer byte --val-fraction 0.1"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("1 documents, 41 train + 5 val tokens (uint8, vocab 256, tokenizer byte)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("MB/s"), std::string::npos) << r.output;
  EXPECT_EQ(read_text(dir / "corpus-byte/val.bin"), "A sma");
  EXPECT_EQ(read_text(dir / "corpus-byte/train.bin"), "ll corpus for a tokenizer demonstration.\n");
  auto meta = dew::data::read_token_meta(dir / "corpus-byte");
  EXPECT_EQ(meta.train_tokens, 41);
  EXPECT_EQ(meta.val_tokens, 5);
}

TEST(TokenizeCommand, ConfigFileThenFlagsThenSet) {
  TempDir dir;
  write_text(dir / "c.json", R"({"input": "from-file.txt", "val_fraction": 0.2, "threads": 3})");
  auto r = run_command(dew_cmd("tokenize --config '" + (dir / "c.json").string() +
                               "' --val-fraction 0.3 --out o --set block_bytes=4096 --set threads=2 --print-config"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("\"input\": \"from-file.txt\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"val_fraction\": 0.3"), std::string::npos) << r.output;  // the flag beats the file
  EXPECT_NE(r.output.find("\"threads\": 2"), std::string::npos) << r.output;          // --set beats the file
  EXPECT_NE(r.output.find("\"block_bytes\": 4096"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"out\": \"o\""), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "o"));
}

TEST(TokenizeCommand, BadInputExitsOneWithTheReasonAndNoOutput) {
  TempDir dir;
  write_text(dir / "empty.txt", "");
  auto r = run_command(dew_cmd("tokenize --input '" + (dir / "empty.txt").string() + "' --out '" + (dir / "t").string() + "'"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("dew: error: input '" + (dir / "empty.txt").string() + "' holds no text"), std::string::npos)
      << r.output;
  r = run_command(dew_cmd("tokenize --input '" + (dir / "empty.txt").string() + "' --out '" + (dir / "t").string() +
                          "' --set val_fraction=lots"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("'val_fraction'"), std::string::npos) << r.output;
  r = run_command(dew_cmd("tokenize --input '" + (dir / "empty.txt").string() + "' --out t --set vocab=3"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("'vocab' does not exist"), std::string::npos) << r.output;
  r = run_command(dew_cmd("tokenize --out '" + (dir / "t").string() + "'"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--input is required"), std::string::npos) << r.output;
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir.path())) left.push_back(e.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"empty.txt"});
}

}  // namespace
