// llama.cpp's own tokenizer tests, passed id for id: the vocabulary-only GGUF files of llama-cpp-python
// 0.3.36's sdist (vendor/llama.cpp/models/ggml-vocab-*.gguf, with .inp texts and .out expected ids, encoded
// without special tokens as its test-tokenizer-0 does), unpacked by scripts/setup.sh into
// ~/.cache/dew/llama-vocabs (or $DEW_LLAMA_VOCABS). Not committed: 75 MB. A vocabulary whose files are absent
// is skipped with the reason. Also decode(encode(x)) == x for each vocabulary that is lossless.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "dew/core/atomic_file.h"
#include "dew/data/tokenizers/gguf_tokenizer.h"
#include "dew/data/tokenizers/pipeline_tokenizer.h"
#include "dew/formats/gguf_file.h"

namespace dew::data {
namespace {
namespace fs = std::filesystem;
using Ids = std::vector<TokenId>;

fs::path vocab_dir() {
  if (const char* dir = std::getenv("DEW_LLAMA_VOCABS")) return dir;
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : "/root") / ".cache" / "dew" / "llama-vocabs";
}

// test-tokenizer-0's format: texts separated by "\n__ggml_vocab_test__\n"; one line of ids per text.
std::vector<std::pair<std::string, Ids>> read_cases(const fs::path& gguf) {
  std::string inputs = read_file(fs::path(gguf.string() + ".inp"));
  std::string outputs = read_file(fs::path(gguf.string() + ".out"));
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (std::size_t pos = 0; pos < inputs.size();) {
    std::size_t next = inputs.find(separator, pos);
    if (next == std::string::npos) {
      texts.push_back(inputs.substr(pos));
      break;
    }
    texts.push_back(inputs.substr(pos, next - pos));
    pos = next + separator.size();
  }
  std::vector<std::pair<std::string, Ids>> cases;
  std::istringstream lines(outputs);
  std::string line;
  for (const std::string& text : texts) {
    if (!std::getline(lines, line)) break;
    Ids ids;
    std::istringstream numbers(line);
    for (TokenId id; numbers >> id;) ids.push_back(id);
    cases.emplace_back(text, std::move(ids));
  }
  EXPECT_EQ(cases.size(), texts.size()) << gguf << ": .inp and .out differ in their number of cases";
  return cases;
}

std::string shown(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Vocabularies whose decode gives back a different text by design: BERT lowercases and decomposes.
bool lossless(const std::string& name) { return name != "bert-bge"; }

class LlamaCppVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCppVocab, EveryCaseIdForId) {
  fs::path gguf = vocab_dir() / ("ggml-vocab-" + GetParam() + ".gguf");
  if (!fs::exists(gguf) || !fs::exists(gguf.string() + ".inp"))
    GTEST_SKIP() << gguf << " or its .inp is absent: run scripts/setup.sh (it unpacks llama-cpp-python 0.3.36's "
                    "vocabularies into ~/.cache/dew/llama-vocabs) or set DEW_LLAMA_VOCABS";
  formats::GgufFile file(gguf);
  PretrainedTokenizer pretrained = gguf_pretrained_tokenizer(gguf_tokenizer_metadata(file), gguf.string());
  const Tokenizer& tokenizer = *pretrained.tokenizer;
  auto cases = read_cases(gguf);
  ASSERT_GE(cases.size(), 40u);
  int wrong = 0, not_round_trip = 0;
  for (const auto& [text, expected] : cases) {
    Ids ids = tokenizer.encode(text, /*allow_special=*/false);
    if (ids != expected) {
      ++wrong;
      ADD_FAILURE() << GetParam() << ": encode(" << shown(text) << ") = " << nlohmann::json(ids).dump() << ", llama.cpp "
                    << nlohmann::json(expected).dump();
      continue;
    }
    if (lossless(GetParam()) && tokenizer.decode(ids) != text) {
      ++not_round_trip;
      ADD_FAILURE() << GetParam() << ": decode(encode(" << shown(text) << ")) = " << shown(tokenizer.decode(ids));
    }
  }
  EXPECT_EQ(wrong, 0) << GetParam() << ": " << wrong << " of " << cases.size() << " cases differ from llama.cpp";
  EXPECT_EQ(not_round_trip, 0);
}

fs::path converted_dir() {
  if (const char* dir = std::getenv("DEW_LLAMA_VOCABS_HF")) return dir;
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : "/root") / ".cache" / "dew" / "llama-vocabs-hf";
}

// The same vocabularies as transformers converts them to tokenizer.json (tools/reference/convert_llama_vocabs.py
// writes them, with Hugging Face `tokenizers`' ids for every .inp text, into ~/.cache/dew/llama-vocabs-hf):
// dew's tokenizer.json path must give Hugging Face's ids.
TEST_P(LlamaCppVocab, TransformersTokenizerJsonGivesHuggingFaceIds) {
  fs::path dir = converted_dir() / GetParam();
  if (!fs::exists(dir / "cases.json"))
    GTEST_SKIP() << dir << " is absent: run tools/reference/convert_llama_vocabs.py with the reference venv "
                    "(transformers 5.24 cannot convert bert and command-r GGUF files)";
  auto tokenizer = load_tokenizer(dir.string());
  nlohmann::json cases = nlohmann::json::parse(read_file(dir / "cases.json"));
  ASSERT_GE(cases.size(), 40u);
  int wrong = 0;
  for (const auto& c : cases) {
    std::string text = c["text"];
    Ids ids = tokenizer->encode(text, /*allow_special=*/true);
    if (ids != c["ids"].get<Ids>()) {
      ++wrong;
      ADD_FAILURE() << GetParam() << " (tokenizer.json): encode(" << shown(text) << ") = " << nlohmann::json(ids).dump()
                    << ", Hugging Face " << c["ids"].dump();
    }
  }
  EXPECT_EQ(wrong, 0) << GetParam() << ": " << wrong << " of " << cases.size() << " cases differ from Hugging Face";
}

// The sdist's one Unigram vocabulary (nomic-bert-moe, tokenizer.ggml.model "t5": XLM-R's 250,002 pieces and
// SentencePiece's nmt_nfkc charsmap) has no .inp/.out; convert_llama_vocabs.py builds a tokenizer.json from
// the GGUF's pieces, scores and charsmap with `tokenizers` and records its ids for 51 texts. Both dew paths,
// that tokenizer.json and the GGUF itself, must give those ids: a check of the charsmap trie and the Viterbi
// search on real SentencePiece data.
TEST(LlamaCppT5Vocab, TokenizerJsonAndGgufGiveHuggingFaceIds) {
  fs::path dir = converted_dir() / "nomic-bert-moe-t5";
  fs::path gguf = vocab_dir() / "ggml-vocab-nomic-bert-moe.gguf";
  if (!fs::exists(dir / "cases.json") || !fs::exists(gguf))
    GTEST_SKIP() << dir << " or " << gguf << " is absent: run scripts/setup.sh, then "
                    "tools/reference/convert_llama_vocabs.py with the reference venv";
  auto from_json = load_tokenizer(dir.string());
  formats::GgufFile file(gguf);
  PretrainedTokenizer from_gguf = gguf_pretrained_tokenizer(gguf_tokenizer_metadata(file), gguf.string());
  nlohmann::json cases = nlohmann::json::parse(read_file(dir / "cases.json"));
  ASSERT_GE(cases.size(), 50u);
  int wrong = 0;
  for (const auto& c : cases) {
    std::string text = c["text"];
    Ids expected = c["ids"].get<Ids>();
    for (const auto& [path, tokenizer] : {std::pair<const char*, const Tokenizer*>{"tokenizer.json", from_json.get()},
                                          {"gguf", from_gguf.tokenizer.get()}}) {
      Ids ids = tokenizer->encode(text, /*allow_special=*/true);
      if (ids == expected) continue;
      ++wrong;
      ADD_FAILURE() << "nomic-bert-moe (" << path << "): encode(" << shown(text) << ") = " << nlohmann::json(ids).dump()
                    << ", Hugging Face " << nlohmann::json(expected).dump();
    }
  }
  EXPECT_EQ(wrong, 0);
}

// tokenizer.ggml.add_bos_token / add_eos_token as the files say them: llama-spm adds BOS (1) and not EOS;
// nomic-bert-moe (t5) adds both, BOS 0 first and EOS 2 last; llama-bpe says nothing, and Llama 3's pre name
// means BOS (128000).
TEST(LlamaCppVocabFlags, AddBosAndAddEosFollowTheFile) {
  auto open = [](const std::string& name) {
    fs::path gguf = vocab_dir() / ("ggml-vocab-" + name + ".gguf");
    formats::GgufFile file(gguf);
    return gguf_pretrained_tokenizer(gguf_tokenizer_metadata(file), gguf.string());
  };
  for (const char* name : {"llama-spm", "nomic-bert-moe", "llama-bpe"})
    if (!fs::exists(vocab_dir() / ("ggml-vocab-" + std::string(name) + ".gguf")))
      GTEST_SKIP() << name << "'s GGUF is absent: run scripts/setup.sh";
  PretrainedTokenizer spm = open("llama-spm");
  EXPECT_TRUE(spm.add_bos);
  EXPECT_EQ(spm.bos_id, 1);
  EXPECT_EQ(spm.encode("Hello").front(), 1);
  const auto& spm_pipeline = dynamic_cast<const PipelineTokenizer&>(*spm.tokenizer);
  EXPECT_EQ(spm_pipeline.add_special_tokens({15043}), (Ids{1, 15043}));
  PretrainedTokenizer t5 = open("nomic-bert-moe");
  const auto& t5_pipeline = dynamic_cast<const PipelineTokenizer&>(*t5.tokenizer);
  EXPECT_EQ(t5_pipeline.add_special_tokens({100}), (Ids{0, 100, 2}));
  PretrainedTokenizer bpe = open("llama-bpe");
  EXPECT_TRUE(bpe.add_bos);
  EXPECT_EQ(bpe.bos_id, 128000);
}

// Every vocabulary of the sdist that has .inp/.out files.
INSTANTIATE_TEST_SUITE_P(Sdist, LlamaCppVocab,
                         ::testing::Values("bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon",
                                           "gemma-4", "gpt-2", "llama-bpe", "llama-spm", "mpt", "phi-3", "qwen2",
                                           "qwen35", "refact", "starcoder"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace dew::data
