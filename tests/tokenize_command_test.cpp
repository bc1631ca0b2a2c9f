#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

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

// --chat: chat JSONL rendered with the tokenizer's chat template into a chat token directory.
std::string chat_line(const std::string& question, const std::string& answer) {
  return "{\"messages\": [{\"role\": \"user\", \"content\": \"" + question +
         "\"}, {\"role\": \"assistant\", \"content\": \"" + answer + "\"}]}\n";
}

std::string chat_tokenizer() { return (dew::test::fixtures() / "chat_data" / "tokenizer").string(); }

TEST(TokenizeCommand, ChatWritesAChatTokenDirectoryAndASummary) {
  TempDir dir;
  write_text(dir / "chat.jsonl", chat_line("Hi", "Hello.") + "\n" + chat_line("2 + 2?", "4") + chat_line("Sky?", "Blue."));
  auto r = run_command(dew_cmd("tokenize --chat --input '" + (dir / "chat.jsonl").string() + "' --out '" +
                               (dir / "chat").string() + "' --tokenizer '" + chat_tokenizer() + "' --val-fraction 0.34"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("3 conversations (2 train + 1 val)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tokenizer tokenizer.json, chat)"), std::string::npos) << r.output;
  auto meta = dew::data::read_token_meta(dir / "chat");
  EXPECT_EQ(meta.documents, 3);
  EXPECT_EQ(read_text(dir / "chat/val.roles").size(), static_cast<std::size_t>(meta.val_tokens));
  EXPECT_EQ(read_text(dir / "chat/train.offsets").size(), 3u * 8);
  auto json = nlohmann::json::parse(read_text(dir / "chat/meta.json"));
  EXPECT_EQ(json["chat"], true);
  EXPECT_EQ(json["train_conversations"], 2);
  EXPECT_TRUE(fs::exists(dir / "chat/tokenizer_config.json"));
}

TEST(TokenizeCommand, ChatRefusesABadLineByNumberAndWritesNothing) {
  TempDir dir;
  write_text(dir / "chat.jsonl", chat_line("Hi", "Hello.") + "{\"messages\": [{\"role\": \"bot\", \"content\": \"x\"}]}\n");
  auto r = run_command(dew_cmd("tokenize --chat --input '" + (dir / "chat.jsonl").string() + "' --out '" +
                               (dir / "chat").string() + "' --tokenizer '" + chat_tokenizer() + "'"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("dew: error: " + (dir / "chat.jsonl").string() +
                          ":2: field 'messages[0].role' is \"bot\"; expected system, user, assistant or tool"),
            std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "chat"));
  // Packing belongs to the SFT loader; a tokenizer without a chat template cannot render conversations.
  r = run_command(dew_cmd("tokenize --chat --pack --input '" + (dir / "chat.jsonl").string() + "' --out '" +
                          (dir / "chat").string() + "' --tokenizer '" + chat_tokenizer() + "'"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("--pack does not apply to --chat"), std::string::npos) << r.output;
  write_text(dir / "ok.jsonl", chat_line("Hi", "Hello."));
  r = run_command(dew_cmd("tokenize --chat --input '" + (dir / "ok.jsonl").string() + "' --out '" + (dir / "chat").string() +
                          "' --tokenizer gpt2"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("tokenizer 'gpt2' has no chat template"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "chat"));
}

}  // namespace
