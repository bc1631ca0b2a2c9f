// runs::open_tokenizer: every form a user can name opens the same tokenizer as the loader of that form,
// and a path that is none of them is refused by name.
#include <gtest/gtest.h>

#include "dew/data/token_files.h"
#include "dew/data/tokenize.h"
#include "dew/formats/gguf_file.h"
#include "dew/interop/gguf_model.h"
#include "dew/runs/kinds/lm_kind.h"
#include "dew/runs/tokenizer_source.h"
#include "run_test_support.h"

namespace fs = std::filesystem;
using dew::runs::open_tokenizer;
using dew::test::TempDir;

namespace {

const std::string kProbe = "Once upon a time, in 1813, Mr. Darcy said: \"It's naïve\"\n\t 42!";

std::vector<dew::data::TokenId> ids_of(const dew::data::PretrainedTokenizer& tokenizer) {
  return tokenizer.tokenizer->encode(kProbe);
}

// A token directory written with `tokenizer`.
fs::path tokens(const fs::path& work, const std::string& tokenizer) {
  dew::test::write_text(work / "corpus.txt", std::string(40, 'x') + "\n" + kProbe + "\n" + kProbe);
  dew::data::TokenizeConfig config;
  config.input = (work / "corpus.txt").string();
  config.out = (work / "tokens").string();
  config.tokenizer = tokenizer;
  config.val_fraction = 0.2;
  config.threads = 1;
  dew::data::tokenize_corpus(config);
  return work / "tokens";
}

}  // namespace

TEST(TokenizerSource, EveryFormOpensTheTokenizerItHolds) {
  const fs::path bpe_file = dew::test::fixtures() / "trained_bpe" / "tokenizer.json";
  const auto bpe_ids = dew::data::load_tokenizer(bpe_file.string())->encode(kProbe);
  const auto gpt2_ids = dew::data::load_tokenizer("gpt2")->encode(kProbe);
  ASSERT_NE(bpe_ids, gpt2_ids);

  EXPECT_EQ(ids_of(open_tokenizer("byte")), dew::data::load_tokenizer("byte")->encode(kProbe));
  EXPECT_EQ(ids_of(open_tokenizer("gpt2")), gpt2_ids);
  EXPECT_EQ(open_tokenizer("gpt2").eos_id, 50256);
  EXPECT_EQ(ids_of(open_tokenizer(bpe_file.string())), bpe_ids);
  EXPECT_EQ(ids_of(open_tokenizer(bpe_file.parent_path().string())), bpe_ids);

  // A token directory, and a run trained on it: the tokenizer the data was written with.
  TempDir work;
  const fs::path data = tokens(work.path(), bpe_file.string());
  EXPECT_EQ(ids_of(open_tokenizer(data.string())), bpe_ids);
  dew::test::SingleThreaded threads;
  dew::runs::start_lm_run(work / "run", dew::test::tiny_lm_run_config(data, 1))->train(nullptr);
  EXPECT_EQ(ids_of(open_tokenizer((work / "run").string())), bpe_ids);

  // A GGUF model: the tokenizer and chat template of its metadata.
  const fs::path gguf = dew::test::fixtures() / "smollm2" / "tiny" / "llama.gguf";
  auto from_gguf = open_tokenizer(gguf.string());
  auto direct = dew::interop::gguf_file_tokenizer(dew::formats::GgufFile(gguf));
  EXPECT_EQ(ids_of(from_gguf), ids_of(direct));
  EXPECT_EQ(from_gguf.eos_id, direct.eos_id);
  EXPECT_EQ(from_gguf.chat_template.has_value(), direct.chat_template.has_value());
}

TEST(TokenizerSource, APathThatHoldsNoTokenizerIsNamed) {
  TempDir work;
  fs::create_directory(work / "empty");
  auto message = dew::test::error_of([&] { open_tokenizer((work / "empty").string()); });
  EXPECT_NE(message.find((work / "empty").string()), std::string::npos) << message;
  EXPECT_NE(message.find("run.json (a run), meta.json (token data)"), std::string::npos) << message;
  message = dew::test::error_of([&] { open_tokenizer((work / "missing.json").string()); });
  EXPECT_NE(message.find("missing.json"), std::string::npos) << message;
}
