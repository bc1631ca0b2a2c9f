// Byte-level BPE: exact ids against Hugging Face tokenizers and tiktoken (fixtures made by
// tools/reference/make_tokenizer_fixtures.py), round trips of arbitrary bytes, safe cuts, save/load.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/data/tokenizers/bpe_tokenizer.h"
#include "dew/data/tokenizers/byte_level.h"
#include "dew/core/sha256.h"
#include "test_support.h"

namespace dew::data {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using Ids = std::vector<TokenId>;

const BpeTokenizer& gpt2() {
  static const auto tokenizer = load_bpe_tokenizer("gpt2");
  return *tokenizer;
}

json read_json(const fs::path& path) { return json::parse(read_file(path)); }

fs::path corpus_path() { return fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/") / ".cache/dew/data/austen.txt"; }

// The corpus slice a fixture was made from, checked by its sha256; nullopt (skip) when the corpus is absent.
std::optional<std::string> prose_slice(const json& prose) {
  if (!fs::exists(corpus_path())) return std::nullopt;
  std::string corpus = read_file(corpus_path());
  std::string slice = corpus.substr(prose["offset"].get<std::size_t>(), prose["length"].get<std::size_t>());
  EXPECT_EQ(dew::sha256_hex(slice), prose["sha256"].get<std::string>()) << "the corpus differs from the fixture's";
  return slice;
}

std::string random_bytes(std::mt19937& rng, std::size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xFF);
  return s;
}

// Mostly prose-like text with letters, spaces, digits, punctuation, multi-byte characters and stray bytes.
std::string random_text(std::mt19937& rng, std::size_t n) {
  static const std::vector<std::string> parts = {"a", "b", "e", "s", "t", "'", " ", " ", "  ", "\n", "\t", "1",
                                                 "42", ".", ",", "é", "日本", "🦄", "\xff", "\xc3", "<|endoftext|>", "'ll", "\xc2\xa0"};
  std::string s;
  while (s.size() < n) s += parts[rng() % parts.size()];
  return s;
}

void expect_cases(const BpeTokenizer& tokenizer, const json& expected) {
  for (const json& c : expected["cases"]) {
    std::string text = c["text"];
    Ids plain = tokenizer.encode(text, false), special = tokenizer.encode(text, true);
    EXPECT_EQ(plain, c["plain"].get<Ids>()) << "text: " << text.substr(0, 80);
    EXPECT_EQ(special, c["special"].get<Ids>()) << "text (special tokens allowed): " << text.substr(0, 80);
    EXPECT_EQ(tokenizer.decode(plain), text);
    EXPECT_EQ(tokenizer.decode(special), text);
  }
}

TEST(BpeTokenizer, Gpt2KnownIds) {
  const auto& t = gpt2();
  EXPECT_EQ(t.name(), "gpt2");
  EXPECT_EQ(t.vocab_size(), 50257);
  EXPECT_EQ(t.eos_id(), 50256);
  EXPECT_EQ(t.encode("Hello world"), (Ids{15496, 995}));
  EXPECT_EQ(t.encode("Hello, world!"), (Ids{15496, 11, 995, 0}));
  EXPECT_EQ(t.encode(" The quick brown fox jumps over the lazy dog."),
            (Ids{383, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13}));
  EXPECT_EQ(t.encode("It's 2024: naïve café — déjà vu 🦄"),
            (Ids{1026, 338, 48609, 25, 41492, 40304, 851, 39073, 73, 24247, 410, 84, 12520, 99, 226}));
  EXPECT_EQ(t.encode("<|endoftext|>", true), (Ids{50256}));
  EXPECT_EQ(t.encode("<|endoftext|>", false), (Ids{27, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_EQ(t.encode(""), Ids{});
}

TEST(BpeTokenizer, Gpt2MatchesTokenizersAndTiktoken) {
  json expected = read_json(test::fixtures() / "tokenizers/gpt2_cases.json");
  ASSERT_GT(expected["cases"].size(), 60u);
  expect_cases(gpt2(), expected);
}

TEST(BpeTokenizer, Gpt2MatchesOnAustenSlice) {
  json expected = read_json(test::fixtures() / "tokenizers/gpt2_cases.json");
  auto slice = prose_slice(expected["prose"]);
  if (!slice) GTEST_SKIP() << corpus_path() << " is absent";
  Ids ids = gpt2().encode(*slice);
  EXPECT_EQ(ids.size(), expected["prose"]["ids"].size());
  EXPECT_EQ(ids, expected["prose"]["ids"].get<Ids>());
}

TEST(BpeTokenizer, EncoderJsonAndVocabBpeEqualTokenizerJson) {
  fs::path dir = test::fixtures() / "tokenizers/gpt2_openai";
  EXPECT_EQ(dew::sha256_hex(read_file(dir / "encoder.json")),
            "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783");
  EXPECT_EQ(dew::sha256_hex(read_file(dir / "vocab.bpe")),
            "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5");
  auto files = load_bpe_tokenizer(dir.string());
  EXPECT_EQ(files->vocab_size(), 50257);
  EXPECT_EQ(files->eos_id(), 50256);
  EXPECT_EQ(files->definition().merges, gpt2().definition().merges);
  EXPECT_EQ(files->definition().vocab, gpt2().definition().vocab);
  expect_cases(*files, read_json(test::fixtures() / "tokenizers/gpt2_cases.json"));
}

TEST(BpeTokenizer, Llama3StyleSplitIgnoreMergesPairMerges) {
  fs::path dir = test::fixtures() / "tokenizers/llama3_style";
  auto t = load_tokenizer((dir / "tokenizer.json").string());
  auto* bpe = dynamic_cast<BpeTokenizer*>(t.get());
  ASSERT_NE(bpe, nullptr);
  json expected = read_json(dir / "expected.json");
  EXPECT_TRUE(bpe->definition().ignore_merges);
  EXPECT_EQ(t->eos_id(), expected["eos_id"].get<TokenId>());  // <|eot_id|>, from tokenizer_config.json
  EXPECT_EQ(t->vocab_size(), 1501);
  expect_cases(*bpe, expected);
  if (auto slice = prose_slice(expected["prose"])) {
    EXPECT_EQ(t->encode(*slice), expected["prose"]["ids"].get<Ids>());
  }
}

TEST(BpeTokenizer, SmolLmStyleDigitsByteLevelStringMerges) {
  fs::path dir = test::fixtures() / "tokenizers/smollm_style";
  auto t = load_bpe_tokenizer(dir.string());  // a directory with tokenizer.json
  json expected = read_json(dir / "expected.json");
  EXPECT_EQ(t->eos_id(), expected["eos_id"].get<TokenId>());  // no tokenizer_config.json: <|endoftext|>
  expect_cases(*t, expected);
  EXPECT_EQ(t->encode("2024"), (Ids{t->encode("2")[0], t->encode("0")[0], t->encode("2")[0], t->encode("4")[0]}));
  if (auto slice = prose_slice(expected["prose"])) {
    EXPECT_EQ(t->encode(*slice), expected["prose"]["ids"].get<Ids>());
  }
}

TEST(BpeTokenizer, RandomBytesRoundTrip) {
  std::mt19937 rng(1234);
  auto llama = load_bpe_tokenizer((test::fixtures() / "tokenizers/llama3_style").string());
  for (int i = 0; i < 300; ++i) {
    std::string bytes = i % 2 ? random_bytes(rng, rng() % 300) : random_text(rng, rng() % 300);
    for (bool special : {false, true}) {
      EXPECT_EQ(gpt2().decode(gpt2().encode(bytes, special)), bytes);
      EXPECT_EQ(llama->decode(llama->encode(bytes, special)), bytes);
    }
  }
  // Long runs of one byte take the long-piece merge path.
  std::string invalid(5000, '\xff');
  EXPECT_EQ(gpt2().decode(gpt2().encode(invalid)), invalid);
  EXPECT_EQ(gpt2().encode("\xff"), Ids{gpt2().token_id("\xff").value()});
}

TEST(BpeTokenizer, SafeCutsDoNotChangeIds) {
  std::mt19937 rng(7);
  std::string text = random_text(rng, 20000) + " and so the story ends here";
  Ids whole = gpt2().encode(text);
  int cuts = 0;
  for (std::size_t from = 0; from < text.size(); from += 997) {
    std::size_t cut = gpt2().safe_cut(text, from, from + 400);
    if (cut == text.size()) continue;
    ++cuts;
    EXPECT_GE(cut, from);
    EXPECT_EQ(text[cut], ' ');
    Ids parts = gpt2().encode(text.substr(0, cut));
    Ids right = gpt2().encode(text.substr(cut));
    parts.insert(parts.end(), right.begin(), right.end());
    EXPECT_EQ(parts, whole) << "cut at " << cut;
  }
  EXPECT_GT(cuts, 0);
  // A pattern not proven safe is never cut.
  BpeParts parts;
  for (int b = 0; b < 256; ++b) parts.vocab.push_back(std::string(1, static_cast<char>(b)));
  parts.split_pattern = R"(\S+|\s+)";
  BpeTokenizer unproven(parts);
  EXPECT_EQ(unproven.safe_cut("hello big world", 0, 15), 15u);
}

TEST(BpeTokenizer, EncodeParallelEqualsEncode) {
  std::mt19937 rng(99);
  std::string text = random_text(rng, 3 << 20);
  EXPECT_EQ(encode_parallel(gpt2(), text, 4), gpt2().encode(text));
  EXPECT_EQ(encode_parallel(gpt2(), text, 3, true), gpt2().encode(text, true));
  if (!fs::exists(corpus_path())) GTEST_SKIP() << corpus_path() << " is absent";
  std::string austen = read_file(corpus_path());
  Ids serial = gpt2().encode(austen);
  EXPECT_GT(serial.size(), 900000u);
  EXPECT_EQ(encode_parallel(gpt2(), austen, 4), serial);
  EXPECT_EQ(gpt2().decode(serial), austen);
}

TEST(BpeTokenizer, PartsConstructorAndSaveRoundTrip) {
  // GPT-2 rebuilt from raw-byte parts, as a trainer would make it, encodes like GPT-2.
  BpeParts parts;
  const auto& g = gpt2();
  for (TokenId id = 0; id < 50256; ++id) parts.vocab.push_back(g.token_bytes(id));
  for (const auto& [left, right] : g.definition().merges)
    parts.merges.emplace_back(from_byte_level(left).value(), from_byte_level(right).value());
  parts.added_tokens.push_back(AddedToken{"<|endoftext|>", 50256, true});
  BpeTokenizer rebuilt(std::move(parts));
  EXPECT_EQ(rebuilt.vocab_size(), 50257);
  EXPECT_EQ(rebuilt.eos_id(), 50256);
  json expected = read_json(test::fixtures() / "tokenizers/gpt2_cases.json");
  expect_cases(rebuilt, expected);

  test::TempDir dir;
  EXPECT_EQ(rebuilt.save(dir.path()), "tokenizer.json");
  auto loaded = load_tokenizer(dir.path().string());
  EXPECT_EQ(loaded->eos_id(), 50256);
  expect_cases(dynamic_cast<const BpeTokenizer&>(*loaded), expected);

  auto llama = load_bpe_tokenizer((test::fixtures() / "tokenizers/llama3_style").string());
  llama->save(dir / "llama");
  auto llama_again = load_bpe_tokenizer((dir / "llama").string());
  EXPECT_EQ(llama_again->eos_id(), llama->eos_id());
  EXPECT_TRUE(llama_again->definition().ignore_merges);
  expect_cases(*llama_again, read_json(test::fixtures() / "tokenizers/llama3_style/expected.json"));
}

// Writes a GPT-2-like tokenizer.json made small (bytes only, one merge) with `edit` applied.
std::string bad_tokenizer(const test::TempDir& dir, const std::function<void(json&)>& edit) {
  json root = {{"added_tokens", json::array()}, {"normalizer", nullptr},
               {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
               {"decoder", {{"type", "ByteLevel"}}}};
  json vocab = json::object();
  const auto& alphabet = byte_level_alphabet();
  for (int b = 0; b < 256; ++b) vocab[alphabet[b]] = b;
  vocab["ab"] = 256;
  root["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}};
  edit(root);
  static int made = 0;  // each in its own directory: a file is loaded after the next one is written
  fs::path path = dir / std::to_string(++made) / "tokenizer.json";
  fs::create_directories(path.parent_path());
  test::write_text(path, root.dump());
  return path.string();
}

void expect_error(const std::string& path, const std::vector<std::string>& words) {
  try {
    load_tokenizer(path);
    ADD_FAILURE() << "loading " << path << " did not fail";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    for (const auto& word : words) EXPECT_NE(message.find(word), std::string::npos) << "'" << word << "' not in: " << message;
  }
}

// load_bpe_tokenizer (the byte-level fast path) refuses the file naming the field; load_tokenizer loads it
// through the general pipeline instead.
void expect_fast_path_refuses(const std::string& path, const std::vector<std::string>& words) {
  try {
    load_bpe_tokenizer(path);
    ADD_FAILURE() << "the byte-level path loaded " << path;
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    for (const auto& word : words) EXPECT_NE(message.find(word), std::string::npos) << "'" << word << "' not in: " << message;
  }
  auto tokenizer = load_tokenizer(path);
  EXPECT_EQ(dynamic_cast<const BpeTokenizer*>(tokenizer.get()), nullptr) << path;
}

TEST(BpeTokenizer, BadFilesAreRefusedWithFileAndField) {
  test::TempDir dir;
  std::string good = bad_tokenizer(dir, [](json&) {});
  EXPECT_EQ(load_tokenizer(good)->encode("ab"), (Ids{256}));

  fs::path malformed = dir / "malformed.json";
  test::write_text(malformed, "{\"model\": {\"type\": \"BPE\", ");
  expect_error(malformed.string(), {"not valid JSON"});
  expect_error(bad_tokenizer(dir, [](json& j) { j["model"]["type"] = "Squiggle"; }), {"model.type", "Squiggle", "Unigram"});
  expect_error(bad_tokenizer(dir, [](json& j) { j["model"]["type"] = "WordPiece"; }), {"model.unk_token", "[UNK]"});
  expect_error(bad_tokenizer(dir, [](json& j) { j["model"].erase("vocab"); }), {"model.vocab", "missing"});
  expect_error(bad_tokenizer(dir, [](json& j) { j["model"]["merges"] = {"a q"}; }), {"model.merges[0]", "'q'"});
  expect_error(bad_tokenizer(dir, [](json& j) { j["model"]["merges"] = {"b a"}; }), {"model.merges[0]", "'ba'"});
  expect_error(bad_tokenizer(dir, [](json& j) { j["model"]["merges"] = {"ab"}; }), {"model.merges[0]"});
  expect_error(bad_tokenizer(dir, [](json& j) { j["model"]["vocab"].erase("a"); }), {"model.vocab", "'a'"});
  expect_error(bad_tokenizer(dir, [](json& j) { j["model"]["vocab"]["x"] = -3; }), {"model.vocab[\"x\"]", "-3"});
  expect_error(bad_tokenizer(dir, [](json& j) { j["model"]["vocab"]["zz"] = 99999999; }), {"model.vocab", "99999999"});
  // What the byte-level fast path refuses, naming the field, the general pipeline loads.
  expect_fast_path_refuses(bad_tokenizer(dir, [](json& j) { j["normalizer"] = {{"type", "NFC"}}; }), {"normalizer", "NFC"});
  expect_fast_path_refuses(bad_tokenizer(dir, [](json& j) { j["pre_tokenizer"]["add_prefix_space"] = true; }),
               {"pre_tokenizer.add_prefix_space"});
  expect_fast_path_refuses(bad_tokenizer(dir, [](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }),
               {"pre_tokenizer.type", "Whitespace"});
  expect_fast_path_refuses(bad_tokenizer(dir, [](json& j) {
                 j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Isolated"}};
               }),
               {"pre_tokenizer", "ByteLevel"});
  expect_error(bad_tokenizer(dir, [](json& j) {
                 j["pre_tokenizer"] = {{"type", "Sequence"},
                                       {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}},
                                                           {"behavior", "Isolated"}},
                                                          {{"type", "ByteLevel"}, {"use_regex", false}}}}};
               }),
               {"pre_tokenizer", "(unclosed"});
  expect_fast_path_refuses(bad_tokenizer(dir, [](json& j) { j["decoder"] = nullptr; }), {"decoder"});
  expect_error(bad_tokenizer(dir, [](json& j) { j["model"]["dropout"] = 0.1; }), {"model.dropout"});
  expect_fast_path_refuses(bad_tokenizer(dir, [](json& j) {
                 j["added_tokens"] = {{{"id", 257}, {"content", "<mask>"}, {"lstrip", true}, {"special", true}}};
               }),
               {"added_tokens[0].lstrip", "<mask>"});
  expect_error((dir / "absent.json").string(), {"not known"});

  // An id outside the vocabulary in decode names the tokenizer (its file) and the id.
  auto t = load_tokenizer(good);
  try {
    t->decode(Ids{1, 2, 257});
    ADD_FAILURE() << "decode accepted id 257";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find(good), std::string::npos) << message;
    EXPECT_NE(message.find("257"), std::string::npos) << message;
    EXPECT_NE(message.find("position 2"), std::string::npos) << message;
  }
  EXPECT_THROW(t->decode(Ids{-1}), Error);
}

}  // namespace
}  // namespace dew::data
