// The tokenizer of a GGUF's metadata: ids equal to transformers' GGUF tokenizer for a tiny byte-level
// vocabulary (fixture tests/fixtures/smollm2/tiny/vocab.json, made by tools/reference/make_smollm2_fixtures.py),
// special and user-defined tokens, pre-tokenizer names, and the errors for bad metadata.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/data/tokenizers/gguf_tokenizer.h"
#include "test_support.h"

using dew::test::error_of;

namespace dew::data {
namespace {
using nlohmann::json;
using Ids = std::vector<TokenId>;

const json& fixture() {
  static const json value = json::parse(read_file(test::fixtures() / "smollm2" / "tiny" / "vocab.json"));
  return value;
}

GgufTokenizerMetadata tiny_metadata() {
  const json& f = fixture();
  GgufTokenizerMetadata m;
  m.model = "gpt2";
  m.pre = f["pre"].get<std::string>();
  m.tokens = f["tokens"].get<std::vector<std::string>>();
  m.token_types = f["token_type"].get<std::vector<std::int64_t>>();
  m.merges = f["merges"].get<std::vector<std::string>>();
  m.bos_id = f["bos_token_id"].get<TokenId>();
  m.eos_id = f["eos_token_id"].get<TokenId>();
  m.unknown_id = f["unknown_token_id"].get<TokenId>();
  m.pad_id = f["padding_token_id"].get<TokenId>();
  m.add_bos = f["add_bos_token"].get<bool>();
  m.chat_template = f["chat_template"].get<std::string>();
  return m;
}

TEST(GgufTokenizer, IdsEqualTransformersGgufTokenizer) {
  auto bpe = gguf_bpe_tokenizer(tiny_metadata(), "tiny.gguf");
  ASSERT_EQ(bpe->vocab_size(), 420);
  for (const json& e : fixture()["encodings"]) {
    std::string text = e["text"].get<std::string>();
    Ids expected = e["ids"].get<Ids>();
    // transformers recognises the file's control tokens written in the text
    EXPECT_EQ(bpe->encode(text, /*allow_special=*/true), expected) << text;
    EXPECT_EQ(bpe->decode(expected), text);
  }
}

TEST(GgufTokenizer, ControlTokensAreSpecialUserDefinedAreAlwaysWhole) {
  GgufTokenizerMetadata m = tiny_metadata();
  m.token_types[5] = 4;  // make token 5 user-defined
  std::string token5 = m.tokens[5];
  auto bpe = gguf_bpe_tokenizer(m, "tiny.gguf");
  EXPECT_EQ(bpe->encode("<|im_start|>", true), Ids{1});
  EXPECT_NE(bpe->encode("<|im_start|>", false), Ids{1});  // special: ordinary text unless allowed
  EXPECT_EQ(bpe->encode(token5, false), Ids{5});
}

// SmolLM2's vocabulary has no token for 21 bytes (0x04, 0xC0, 0xF5-0xFF, ...); transformers drops them.
TEST(GgufTokenizer, BytesWithoutTokenAreDropped) {
  GgufTokenizerMetadata m = tiny_metadata();
  auto it = std::find(m.tokens.begin(), m.tokens.end(), "\u0104");  // 'Ą' is byte 0x04 in byte-level text
  ASSERT_NE(it, m.tokens.end());
  *it = "<unused-0x04>";
  auto bpe = gguf_bpe_tokenizer(m, "tiny.gguf");
  EXPECT_EQ(bpe->encode("\x04"), Ids{});
  EXPECT_EQ(bpe->encode("Hello\x04 world"), bpe->encode("Hello world"));
}

TEST(GgufTokenizer, PretrainedTokenizerFields) {
  PretrainedTokenizer t = gguf_pretrained_tokenizer(tiny_metadata(), "tiny.gguf");
  EXPECT_EQ(t.bos_id, 1);
  EXPECT_EQ(t.eos_id, 2);
  EXPECT_EQ(t.pad_id, 2);
  EXPECT_EQ(t.bos_token, "<|im_start|>");
  EXPECT_EQ(t.eos_token, "<|im_end|>");
  EXPECT_FALSE(t.add_bos);
  EXPECT_EQ(t.stop_ids, std::vector<TokenId>{2});
  ASSERT_TRUE(t.chat_template.has_value());
  EXPECT_EQ(t.tokenizer->eos_id(), 2);
  nlohmann::ordered_json messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Hi"}}});
  std::string prompt = t.render_chat(messages, true);
  EXPECT_EQ(prompt, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // transformers: apply_chat_template, then encode(add_special_tokens=False) on the same tiny GGUF
  EXPECT_EQ(t.encode(prompt), (Ids{1, 87, 85, 263, 201, 42, 75, 2, 201, 1, 67, 85, 85, 264, 86, 274, 86, 201}));
}

TEST(GgufTokenizer, PreTokenizerNames) {
  EXPECT_EQ(gguf_pre_tokenizer("smollm", "f").split_patterns.size(), 2u);
  EXPECT_EQ(gguf_pre_tokenizer("qwen2", "f").split_patterns, std::vector<std::string>{std::string(kQwen2Pattern)});
  GgufPreTokenizer llama3 = gguf_pre_tokenizer("llama-bpe", "f");
  EXPECT_TRUE(llama3.ignore_merges);
  EXPECT_TRUE(llama3.add_bos_default);
  // llama.cpp's names beyond those: DeepSeek's six regexes, Falcon's three, GPT-2's for olmo and phi-2.
  EXPECT_EQ(gguf_pre_tokenizer("deepseek-llm", "f").split_patterns.size(), 6u);
  EXPECT_EQ(gguf_pre_tokenizer("falcon", "f").split_patterns.size(), 3u);
  EXPECT_EQ(gguf_pre_tokenizer("olmo", "f").split_patterns, std::vector<std::string>{std::string(kGpt2Pattern)});
  EXPECT_EQ(gguf_pre_tokenizer("phi-2", "f").split_patterns, std::vector<std::string>{std::string(kGpt2Pattern)});
  EXPECT_FALSE(gguf_pre_tokenizer("smaug-bpe", "f").ignore_merges);
  std::string message = error_of([] { gguf_pre_tokenizer("klingon-bpe", "model.gguf"); });
  EXPECT_NE(message.find("model.gguf"), std::string::npos) << message;
  EXPECT_NE(message.find("tokenizer.ggml.pre"), std::string::npos) << message;
  EXPECT_NE(message.find("\"klingon-bpe\""), std::string::npos) << message;
  EXPECT_NE(message.find("deepseek-coder"), std::string::npos) << message;
}

TEST(GgufTokenizer, BadMetadataNamesFileAndKey) {
  auto expect_error = [](GgufTokenizerMetadata m, const std::string& key) {
    std::string message = error_of([&] { gguf_bpe_tokenizer(m, "bad.gguf"); });
    EXPECT_NE(message.find("bad.gguf"), std::string::npos) << message;
    EXPECT_NE(message.find(key), std::string::npos) << message;
  };
  GgufTokenizerMetadata m = tiny_metadata();
  m.model = "llama";
  expect_error(m, "tokenizer.ggml.model");
  m = tiny_metadata();
  m.token_types.pop_back();
  expect_error(m, "tokenizer.ggml.token_type");
  m = tiny_metadata();
  m.merges[3] = "nospace";
  expect_error(m, "tokenizer.ggml.merges[3]");
  m = tiny_metadata();
  m.eos_id = 100000;
  expect_error(m, "tokenizer.ggml.eos_token_id");
  m = tiny_metadata();
  m.pre.clear();
  expect_error(m, "tokenizer.ggml.pre");
  // A model kind dew does not read is refused by name, listing the kinds it does.
  m = tiny_metadata();
  m.model = "rwkv";
  std::string message = error_of([&] { gguf_pretrained_tokenizer(m, "bad.gguf"); });
  EXPECT_NE(message.find("bad.gguf"), std::string::npos) << message;
  EXPECT_NE(message.find("\"rwkv\""), std::string::npos) << message;
  EXPECT_NE(message.find("t5"), std::string::npos) << message;
}

}  // namespace
}  // namespace dew::data
