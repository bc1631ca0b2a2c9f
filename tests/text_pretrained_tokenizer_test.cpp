// A checkpoint's tokenizer directory (tokenizer.json + tokenizer_config.json + generation_config.json)
// against what transformers' AutoTokenizer and GenerationConfig make of the same directory
// (tests/fixtures/chat_templates/pretrained/, made by tools/reference/make_chat_template_fixtures.py), and
// save_pretrained_tokenizer's output, which that script checks loads in transformers with the same ids.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/data/tokenizers/pretrained_tokenizer.h"
#include "test_support.h"

namespace dew::data {
namespace {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using Ids = std::vector<TokenId>;

fs::path checkpoint() { return test::fixtures() / "chat_templates" / "pretrained" / "llama3_checkpoint"; }
Json expected() { return Json::parse(read_file(checkpoint() / "expected.json")); }

void expect_like_transformers(const PretrainedTokenizer& tokenizer, const Json& want) {
  ASSERT_TRUE(tokenizer.bos_id && tokenizer.eos_id);
  EXPECT_EQ(*tokenizer.bos_id, want["bos_id"].get<TokenId>());
  EXPECT_EQ(*tokenizer.eos_id, want["eos_id"].get<TokenId>());
  EXPECT_EQ(tokenizer.bos_token, want["bos_token"].get<std::string>());
  EXPECT_EQ(tokenizer.eos_token, want["eos_token"].get<std::string>());
  EXPECT_FALSE(tokenizer.pad_id);
  EXPECT_TRUE(tokenizer.add_bos);
  ASSERT_TRUE(tokenizer.model_max_length);
  EXPECT_EQ(*tokenizer.model_max_length, want["model_max_length"].get<long long>());
  // eos first, then generation_config.json's other end-of-turn ids.
  EXPECT_EQ(tokenizer.stop_ids, (Ids{2, 1}));
  for (const Json& sample : want["encode"])
    EXPECT_EQ(tokenizer.encode(sample["text"].get<std::string>()), sample["ids"].get<Ids>()) << sample["text"];
  const Json& chat = want["chat"];
  std::string text = tokenizer.render_chat(chat["messages"], chat["add_generation_prompt"].get<bool>());
  EXPECT_EQ(text, chat["text"].get<std::string>());
  EXPECT_EQ(tokenizer.tokenizer->encode(text, /*allow_special=*/true), chat["ids"].get<Ids>());
}

TEST(PretrainedTokenizer, LoadsACheckpointDirectoryLikeTransformers) {
  expect_like_transformers(load_pretrained_tokenizer(checkpoint()), expected());
}

TEST(PretrainedTokenizer, SavedDirectoryLoadsBackTheSame) {
  PretrainedTokenizer original = load_pretrained_tokenizer(checkpoint());
  test::TempDir dir;
  save_pretrained_tokenizer(original, dir.path());
  expect_like_transformers(load_pretrained_tokenizer(dir.path()), expected());
  // The committed copy is what tools/reference/make_chat_template_fixtures.py --check-saved loaded in
  // transformers; a change to the saved form must be checked there again.
  fs::path committed = test::fixtures() / "chat_templates" / "pretrained" / "dew_saved";
  if (const char* out = std::getenv("DEW_WRITE_SAVED_TOKENIZER")) save_pretrained_tokenizer(original, out);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    EXPECT_EQ(read_file(dir.path() / file), read_file(committed / file)) << file;
}

TEST(PretrainedTokenizer, ReadsTheConfigFieldsInTheirOtherForms) {
  test::TempDir dir;
  for (const char* file : {"tokenizer.json"}) fs::copy_file(checkpoint() / file, dir / file);
  test::write_text(dir / "tokenizer_config.json",
                   R"({"bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|end_of_text|>"},
                       "pad_token": "<|eot_id|>", "add_bos_token": false, "model_max_length": 1e30,
                       "chat_template": "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"})");
  PretrainedTokenizer t = load_pretrained_tokenizer(dir.path());
  EXPECT_FALSE(t.add_bos);
  EXPECT_EQ(t.eos_id, 1);
  EXPECT_EQ(t.pad_id, 2);
  EXPECT_FALSE(t.model_max_length);
  EXPECT_EQ(t.stop_ids, (Ids{1}));
  EXPECT_EQ(t.encode("Hello, world!"), (Ids{42, 693, 81, 14, 987, 3}));
  EXPECT_EQ(t.render_chat(Json::parse(R"([{"role": "user", "content": "x"}])"), false), "<|begin_of_text|>x<|end_of_text|>");
}

TEST(PretrainedTokenizer, ErrorsNameTheFileAndField) {
  test::TempDir dir;
  fs::copy_file(checkpoint() / "tokenizer.json", dir / "tokenizer.json");
  auto error_for = [&](const std::string& config) {
    test::write_text(dir / "tokenizer_config.json", config);
    try {
      load_pretrained_tokenizer(dir.path());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error_for(R"({"eos_token": "not one token"})").find("eos_token"), std::string::npos);
  EXPECT_NE(error_for(R"({"chat_template": [{"name": "tool_use", "template": "x"}]})").find("no template named 'default'"),
            std::string::npos);
  EXPECT_NE(error_for(R"({"chat_template": "{% if %}"})").find("chat_template:1: syntax error"), std::string::npos)
      << error_for(R"({"chat_template": "{% if %}"})");
  EXPECT_NE(error_for(R"({"add_bos_token": "yes"})").find("add_bos_token"), std::string::npos);
  test::write_text(dir / "tokenizer_config.json", "{}");
  test::write_text(dir / "generation_config.json", R"({"eos_token_id": [2, 999999]})");
  try {
    load_pretrained_tokenizer(dir.path());
    ADD_FAILURE() << "expected an error for an eos id outside the vocabulary";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("generation_config.json: eos_token_id 999999"), std::string::npos) << e.what();
  }
  fs::remove(dir / "generation_config.json");
  PretrainedTokenizer no_template = load_pretrained_tokenizer(dir.path());
  EXPECT_THROW(no_template.render_chat(Json::array(), true), Error);
}

}  // namespace
}  // namespace dew::data
