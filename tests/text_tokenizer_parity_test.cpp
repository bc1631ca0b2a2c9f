// tokenizer.json pipelines id for id against Hugging Face `tokenizers` 0.23.3: tiny tokenizers shaped like
// Llama 2 / Mistral (SentencePiece BPE, byte fallback), T5 (Unigram, Precompiled charsmap), BERT (WordPiece)
// and Qwen 2 (NFC + Split + ByteLevel), plus one BPE under many normalizers, pre-tokenizers, decoders and
// post-processors. Fixtures: tests/fixtures/pipeline_tokenizers/, made by
// tools/reference/make_pipeline_tokenizer_fixtures.py.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/data/tokenizers/pipeline_tokenizer.h"
#include "dew/data/tokenizers/pretrained_tokenizer.h"
#include "test_support.h"

namespace dew::data {
namespace {
using nlohmann::json;
using Ids = std::vector<TokenId>;

// Rust's String::from_utf8_lossy, one U+FFFD per invalid byte (enough for the fixtures' lone bytes): Hugging
// Face's ByteLevel decoder returns that, where dew returns the bytes themselves.
std::string lossy_utf8(const std::string& bytes) {
  std::string out;
  for (std::size_t i = 0; i < bytes.size();) {
    auto c = static_cast<unsigned char>(bytes[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool valid = n > 0 && i + n <= bytes.size();
    for (std::size_t k = 1; valid && k < n; ++k) valid = (static_cast<unsigned char>(bytes[i + k]) & 0xC0) == 0x80;
    if (valid) out.append(bytes, i, n), i += n;
    else out += "\xEF\xBF\xBD", ++i;
  }
  return out;
}

// JSON text of a value that may hold invalid UTF-8 (a wrong decode): shown with U+FFFD, not thrown.
std::string shown(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

std::filesystem::path fixture_dir() { return test::fixtures() / "pipeline_tokenizers"; }

// Every case of one fixture: ids without and with special tokens, and the decoded text. Returns the number
// of cases that differ (each one reported).
int check_cases(const Tokenizer& tokenizer, const json& cases, const std::string& label) {
  const auto* pipeline = dynamic_cast<const PipelineTokenizer*>(&tokenizer);
  EXPECT_NE(pipeline, nullptr) << label << " did not load through the general pipeline";
  if (!pipeline) return 1;
  int failures = 0;
  for (const json& c : cases) {
    std::string text = c["text"];
    Ids ids = tokenizer.encode(text, /*allow_special=*/true);
    Ids expected = c["ids"].get<Ids>();
    if (ids != expected) {
      ADD_FAILURE() << label << ": encode(" << json(text).dump() << ") = " << json(ids).dump() << ", expected "
                    << json(expected).dump();
      ++failures;
      continue;
    }
    Ids with_special = pipeline->add_special_tokens(ids);
    if (with_special != c["ids_with_special"].get<Ids>()) {
      ADD_FAILURE() << label << ": with special tokens " << json(text).dump() << " = " << json(with_special).dump()
                    << ", expected " << c["ids_with_special"].dump();
      ++failures;
    }
    std::string decoded = tokenizer.decode(expected);
    if (lossy_utf8(decoded) != c["decoded"].get<std::string>()) {
      ADD_FAILURE() << label << ": decode(" << json(expected).dump() << ") = " << shown(decoded) << ", expected "
                    << c["decoded"].dump();
      ++failures;
    }
  }
  return failures;
}

class PipelineParity : public ::testing::TestWithParam<std::string> {};

TEST_P(PipelineParity, IdsAndDecodeEqualHuggingFace) {
  std::filesystem::path dir = fixture_dir() / GetParam();
  auto tokenizer = load_tokenizer(dir.string());
  json cases = json::parse(read_file(dir / "cases.json"));
  ASSERT_GE(cases.size(), 30u);
  EXPECT_EQ(check_cases(*tokenizer, cases, GetParam()), 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PipelineParity,
                         ::testing::Values("llama2_spm", "mistral_spm", "t5_unigram", "bert_wordpiece",
                                           "qwen2_bytelevel"));

TEST(PipelineParity, ComponentVariantsEqualHuggingFace) {
  json base = json::parse(read_file(fixture_dir() / "variants_base.json"));
  json variants = json::parse(read_file(fixture_dir() / "variants.json"));
  ASSERT_GE(variants.size(), 20u);
  for (const json& variant : variants) {
    json spec = base;
    for (auto it = variant["override"].begin(); it != variant["override"].end(); ++it) spec[it.key()] = it.value();
    std::string name = variant["name"];
    PipelineTokenizer tokenizer(read_tokenizer_pipeline(spec.dump(), name + ".json"), name);
    EXPECT_EQ(check_cases(tokenizer, variant["cases"], name), 0) << name;
  }
}

// What `dew tokenizer encode --tokenizer DIR` opens for a fixture directory (it has tokenizer_config.json):
// the checkpoint's tokenizer, with the same ids.
TEST(PipelineParity, EachFixtureLoadsAsACheckpointTokenizer) {
  for (const char* name : {"llama2_spm", "mistral_spm", "t5_unigram", "bert_wordpiece", "qwen2_bytelevel"}) {
    PretrainedTokenizer pretrained = load_pretrained_tokenizer(fixture_dir() / name);
    json cases = json::parse(read_file(fixture_dir() / name / "cases.json"));
    EXPECT_EQ(check_cases(*pretrained.tokenizer, cases, name), 0) << name;
    EXPECT_TRUE(pretrained.eos_id.has_value() || std::string(name) == "bert_wordpiece") << name;
  }
}

// What an HF export does with a checkpoint's tokenizer: written back, it reloads to the same ids and flags.
TEST(PipelineParity, SavedCheckpointTokenizerReloadsTheSame) {
  for (const char* name : {"llama2_spm", "t5_unigram", "bert_wordpiece"}) {
    PretrainedTokenizer original = load_pretrained_tokenizer(fixture_dir() / name);
    test::TempDir dir;
    save_pretrained_tokenizer(original, dir.path());
    PretrainedTokenizer again = load_pretrained_tokenizer(dir.path());
    EXPECT_EQ(again.add_bos, original.add_bos) << name;
    EXPECT_EQ(again.eos_id, original.eos_id) << name;
    json cases = json::parse(read_file(fixture_dir() / name / "cases.json"));
    EXPECT_EQ(check_cases(*again.tokenizer, cases, std::string(name) + " (saved)"), 0) << name;
  }
}

TEST(PipelineParity, PretrainedTokenizerAddsBosFromTemplate) {
  PretrainedTokenizer llama = load_pretrained_tokenizer(fixture_dir() / "llama2_spm");
  EXPECT_TRUE(llama.add_bos);
  EXPECT_EQ(llama.bos_id, 1);
  EXPECT_EQ(llama.eos_id, 2);
  Ids ids = llama.encode("Hello world");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 1);
}

// Hugging Face's Lowercase is Rust's char::to_lowercase per character: İ becomes i + U+0307, final sigma is not
// special (outputs from tokenizers 0.23.3's normalize_str).
TEST(PipelineParity, LowercaseIsRustsPerCharacterMapping) {
  NormalizerPtr lower = read_normalizer(JsonFields{"t.json"}, json{{"type", "Lowercase"}}, "normalizer");
  EXPECT_EQ(lower->normalize("\u0130STANBUL \u039F\u0394\u039F\u03A3 \u01C5 \u1E9E"),
            "i\u0307stanbul \u03BF\u03B4\u03BF\u03C3 \u01C6 \u00DF");
}

TEST(PipelineParity, UnknownComponentTypeIsNamedWithTheSupportedOnes) {
  json spec = json::parse(read_file(fixture_dir() / "variants_base.json"));
  spec["normalizer"] = {{"type", "Squiggle"}};
  std::string message = test::error_of([&] { read_tokenizer_pipeline(spec.dump(), "tok.json"); });
  EXPECT_NE(message.find("tok.json"), std::string::npos) << message;
  EXPECT_NE(message.find("normalizer.type"), std::string::npos) << message;
  EXPECT_NE(message.find("Squiggle"), std::string::npos) << message;
  EXPECT_NE(message.find("Precompiled"), std::string::npos) << message;
}

}  // namespace
}  // namespace dew::data
