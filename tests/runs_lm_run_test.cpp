// An lm run (runs/decoder_run.h with kinds/lm_kind.h): the run directory of `dew train lm` (run.json, tokenizer copy, resume rules, checks against the
// data before anything is written) and the train -> evaluate -> load round trip.
#include <gtest/gtest.h>

#include "dew/core/error.h"
#include "dew/data/tokenize.h"
#include "dew/formats/safetensors.h"
#include "dew/runs/kinds/lm_kind.h"
#include "dew/runs/run_directory.h"
#include "dew/training/checkpoint.h"
#include "run_test_support.h"

using dew::test::error_of;

namespace fs = std::filesystem;
using dew::runs::start_lm_run;
using dew::test::open_decoder_run;
using dew::runs::LMRunConfig;
using dew::test::TempDir;

namespace {

LMRunConfig tiny_run(const fs::path& data, std::int64_t steps) {
  LMRunConfig c = dew::test::tiny_lm_run_config(data, steps);
  c.data.prefetch = 2;
  c.trainer.log_every = 2;
  c.optim.schedule = "constant";
  return c;
}

}  // namespace

TEST(LMRunKind, StartWritesRunJsonWithTheResolvedConfig) {
  TempDir data, runs;
  dew::test::write_tiny_tokens(data.path());
  auto dir = runs.path() / "run";
  auto run = start_lm_run(dir, tiny_run(data.path(), 4));
  EXPECT_FALSE(run->resumed());
  EXPECT_EQ(dew::runs::lm_config(*run).model.vocab_size, 64);  // taken from meta.json
  EXPECT_TRUE(fs::path(dew::runs::lm_config(*run).data.path).is_absolute());

  auto file = dew::runs::read_run_file(dir);
  EXPECT_EQ(file.kind, "lm");
  EXPECT_EQ(file.tokenizer, "byte");
  EXPECT_EQ(file.config["model"]["vocab_size"], 64);
  EXPECT_EQ(file.config["data"]["seq_len"], 16);
  auto stored = dew::runs::stored_lm_config(dir);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(dew::config::to_json(*stored), dew::config::to_json(dew::runs::lm_config(*run)));
  EXPECT_FALSE(dew::runs::stored_lm_config(runs.path() / "missing").has_value());
}

TEST(LMRunKind, CopiesABpeTokenizerIntoTheRun) {
  TempDir work;
  dew::test::write_text(work.path() / "corpus.txt", std::string(200, 'a') + " The quick brown fox jumps over the lazy dog. " +
                                                     std::string(3000, 'x'));
  dew::data::TokenizeConfig t;
  t.input = (work.path() / "corpus.txt").string();
  t.out = (work.path() / "tokens").string();
  t.tokenizer = "gpt2";
  t.val_fraction = 0.5;
  dew::data::tokenize_corpus(t);

  auto config = tiny_run(work.path() / "tokens", 1);
  auto run = start_lm_run(work.path() / "run", config);
  EXPECT_EQ(dew::runs::lm_config(*run).model.vocab_size, 50257);
  EXPECT_EQ(dew::runs::read_run_file(work.path() / "run").tokenizer, "tokenizer/tokenizer.json");
  fs::remove_all(work.path() / "tokens");  // the run keeps working without its data's tokenizer
  auto tokenizer = open_decoder_run(work.path() / "run")->tokenizer();
  EXPECT_EQ(tokenizer->vocab_size(), 50257);
  EXPECT_EQ(tokenizer->decode(tokenizer->encode("Once upon a time")), "Once upon a time");
  EXPECT_EQ(tokenizer->encode(" the").size(), 1u);  // GPT-2's merges, not bytes
}

TEST(LMRunKind, ResumingMayChangeOnlyTrainerSettings) {
  TempDir data, runs;
  dew::test::write_tiny_tokens(data.path());
  auto dir = runs.path() / "run";
  auto config = tiny_run(data.path(), 4);
  start_lm_run(dir, config);

  auto more = *dew::runs::stored_lm_config(dir);
  more.trainer.steps = 10;
  auto resumed = start_lm_run(dir, more);
  EXPECT_TRUE(resumed->resumed());
  EXPECT_EQ(dew::runs::read_run_file(dir).config["trainer"]["steps"], 10);

  auto deeper = more;
  deeper.model.num_layers = 3;
  auto message = error_of([&] { start_lm_run(dir, deeper); });
  EXPECT_NE(message.find("model.num_layers = 2"), std::string::npos) << message;
  EXPECT_NE(message.find("asks for 3"), std::string::npos) << message;
  EXPECT_EQ(dew::runs::read_run_file(dir).config["model"]["num_layers"], 2);  // nothing overwritten

  auto longer = more;
  longer.data.seq_len = 8;
  message = error_of([&] { start_lm_run(dir, longer); });
  EXPECT_NE(message.find("data.seq_len"), std::string::npos) << message;
}

TEST(LMRunKind, RefusesBadConfigsBeforeWritingAnything) {
  TempDir data, runs, packed;
  dew::test::write_tiny_tokens(data.path());
  auto dir = runs.path() / "run";
  auto expect_refused = [&](LMRunConfig c, const std::string& fragment) {
    auto message = error_of([&] { start_lm_run(dir, c); });
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
    EXPECT_FALSE(fs::exists(dir)) << fragment;
  };
  auto c = tiny_run(data.path(), 4);
  auto small_vocab = c;
  small_vocab.model.vocab_size = 32;
  expect_refused(small_vocab, "model.vocab_size is 32 but the data in");
  auto long_rows = c;
  long_rows.data.seq_len = 64;
  expect_refused(long_rows, "data.seq_len (64) is larger than model.max_seq_len (32)");
  auto no_data = c;
  no_data.data.path = "";
  expect_refused(no_data, "data.path is not set");
  auto missing = c;
  missing.data.path = (runs.path() / "nowhere").string();
  expect_refused(missing, "is not a directory");
  auto pack = c;
  pack.data.pack = true;
  expect_refused(pack, "says packed: false");
  auto bad_optim = c;
  bad_optim.optim.name = "lion";
  expect_refused(bad_optim, "optim.name");
  auto bad_trainer = c;
  bad_trainer.trainer.batch_size = 0;
  expect_refused(bad_trainer, "trainer.batch_size");
  auto bad_heads = c;
  bad_heads.model.num_heads = 5;
  expect_refused(bad_heads, "num_heads");

  fs::create_directories(dir);
  dew::test::write_text(dir / "notes.txt", "mine");
  auto message = error_of([&] { start_lm_run(dir, c); });
  EXPECT_NE(message.find("is not empty and holds no run.json"), std::string::npos) << message;
  EXPECT_EQ(dew::test::read_text(dir / "notes.txt"), "mine");
  EXPECT_FALSE(fs::exists(dir / "run.json"));
}

TEST(LMRunKind, OpenRefusesWhatIsNotAnLmRun) {
  TempDir dir;
  auto message = error_of([&] { open_decoder_run(dir.path()); });
  EXPECT_NE(message.find("is not a run directory (no run.json)"), std::string::npos) << message;
  dew::runs::write_run_file(dir.path(), {"telepathy", "byte", dew::config::Json::object()});
  message = error_of([&] { open_decoder_run(dir.path()); });
  EXPECT_NE(message.find("run kind \"telepathy\" is not one this dew knows (lm"), std::string::npos) << message;
  dew::test::write_text(dir.path() / "run.json", R"({"format": "dew-run", "version": 7})");
  message = error_of([&] { open_decoder_run(dir.path()); });
  EXPECT_NE(message.find("\"version\" is 7"), std::string::npos) << message;
  dew::test::write_text(dir.path() / "run.json", R"({"format": "dew-run", "version": 1, "kind": "lm", "tokenizer": "byte",
    "config": {"model": {"num_layerz": 2}}})");
  message = error_of([&] { open_decoder_run(dir.path()); });
  EXPECT_NE(message.find("model.num_layerz"), std::string::npos) << message;
}

// Through the run layer, with windows behind a prefetcher: stopping at step 4 and resuming to 8 gives the
// weights of an 8-step run, bit for bit; evaluation of the run equals the trainer's last validation.
TEST(LMRunKind, StoppedAndResumedRunEqualsAnUninterruptedOne) {
  dew::test::SingleThreaded threads;
  TempDir data, runs;
  dew::test::write_tiny_tokens(data.path(), 3000, 400);
  auto straight_config = tiny_run(data.path(), 8);
  auto straight = start_lm_run(runs.path() / "straight", straight_config);
  auto result = straight->train(nullptr);
  EXPECT_EQ(result.step, 8);
  ASSERT_TRUE(result.validation.count("ce"));

  // Stopping is modelled as a 4-step run extended to 8, so the schedule must not depend on the total
  // (a run interrupted by a signal keeps its total; the trainer tests cover that case).
  auto first_half = tiny_run(data.path(), 4);
  start_lm_run(runs.path() / "stopped", first_half)->train(nullptr);
  auto resumed_config = *dew::runs::stored_lm_config(runs.path() / "stopped");
  resumed_config.trainer.steps = 8;
  auto resumed = start_lm_run(runs.path() / "stopped", resumed_config);
  EXPECT_EQ(resumed->train(nullptr).step, 8);

  dew::training::Checkpoint a(runs.path() / "straight" / "8"), b(runs.path() / "stopped" / "8");
  for (const auto& name : a.params().names()) {
    EXPECT_TRUE(at::equal(a.params().whole(name), b.params().whole(name))) << name;
  }
  EXPECT_EQ(a.state().data_position, b.state().data_position);

  auto reopened = open_decoder_run(runs.path() / "straight");
  fs::path loaded;
  auto stats = reopened->evaluate({}, &loaded);
  EXPECT_EQ(loaded, runs.path() / "straight" / "8");
  EXPECT_NEAR(stats.mean("ce"), result.validation.at("ce"), 1e-6);
  EXPECT_NEAR(stats.summary().at("perplexity"), result.validation.at("perplexity"), 1e-3);
  // The live weights are another model than the EMA copy, and an earlier step another again.
  EXPECT_NE(reopened->evaluate({.live = true}).mean("ce"), stats.mean("ce"));
  EXPECT_NE(reopened->evaluate({.step = 4}).mean("ce"), stats.mean("ce"));
  auto message = error_of([&] { reopened->load_model(false, 5); });
  EXPECT_NE(message.find("no checkpoint of step 5; it has: 4, 8"), std::string::npos) << message;
}
