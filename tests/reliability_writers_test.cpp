// What the commands that write (train, tokenize, export, tokenizer train) do with the directories they are
// given: never destroy what is not theirs, refuse a second writer, leave nothing behind when a fresh run
// cannot start, and clean up the temporaries a killed writer left. Each test runs the binary, as a user would.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_test_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using dew::test::run_command;
using dew::test::TempDir;

namespace {

const char* const kTinyModel = dew::test::kTinyModelFlags;

fs::path tiny_gguf() { return dew::test::fixtures() / "smollm2" / "tiny" / "llama.gguf"; }

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

dew::test::CommandResult run_dew(const std::string& args) { return run_command(dew::test::dew_single_threaded(args)); }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A token directory of repetitive English, in the tiny GGUF's BPE vocabulary (420 tokens), so that the run
// exports as a Hugging Face directory.
fs::path make_tokens(const fs::path& work) {
  std::string text;
  for (int i = 0; i < 60; ++i) text += "Once upon a time there was a little house by the sea. ";
  dew::test::write_text(work / "corpus.txt", text);
  auto result = run_dew("tokenize --input " + q(work / "corpus.txt") + " --out " + q(work / "tokens") +
                        " --val-fraction 0.2 --tokenizer " + q(tiny_gguf()));
  EXPECT_EQ(result.status, 0) << result.output;
  return work / "tokens";
}

dew::test::CommandResult train(const fs::path& tokens, const fs::path& run, const std::string& extra) {
  return run_dew("train lm --data " + q(tokens) + " --out " + q(run) + kTinyModel + " " + extra);
}

// The pid of a process that has exited (and been reaped): no live process owns it, for a while at least.
pid_t dead_pid() {
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

// One trained run (checkpoints 4 and 8) shared by the tests; each test that changes it works on a copy.
class ReliabilityWriters : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    shared_ = new TempDir();
    tokens_ = make_tokens(shared_->path());
    auto trained = train(tokens_, shared_->path() / "run", "--set trainer.steps=8");
    ASSERT_EQ(trained.status, 0) << trained.output;
  }
  static void TearDownTestSuite() {
    delete shared_;
    shared_ = nullptr;
  }
  // A copy of the trained run at `where`.
  static fs::path copy_run(const fs::path& where) {
    fs::copy(shared_->path() / "run", where, fs::copy_options::recursive);
    return where;
  }
  static TempDir* shared_;
  static fs::path tokens_;
};
TempDir* ReliabilityWriters::shared_ = nullptr;
fs::path ReliabilityWriters::tokens_;

}  // namespace

TEST_F(ReliabilityWriters, ExportRefusesToWriteOverOrAroundTheModel) {
  TempDir work;
  auto run = copy_run(work / "run");
  auto itself = run_dew("export " + q(run) + " " + q(run) + " --force");
  EXPECT_EQ(itself.status, 1) << itself.output;
  EXPECT_TRUE(contains(itself.output, "is the model")) << itself.output;
  auto inside = run_dew("export " + q(run) + " " + q(run / "8") + " --force");
  EXPECT_EQ(inside.status, 1) << inside.output;
  EXPECT_TRUE(contains(inside.output, "inside the model")) << inside.output;
  auto around = run_dew("export " + q(run) + " " + q(work.path()) + " --force");
  EXPECT_EQ(around.status, 1) << around.output;
  EXPECT_TRUE(contains(around.output, "contains the model")) << around.output;
  EXPECT_TRUE(fs::exists(run / "run.json"));
  EXPECT_TRUE(fs::exists(run / "8" / "state.json"));
  EXPECT_TRUE(fs::exists(run / "8" / "optimizer.safetensors"));
  EXPECT_TRUE(fs::exists(run / "4" / "state.json"));
  EXPECT_TRUE(fs::exists(run / "tracking" / "scalars.jsonl"));
}

TEST_F(ReliabilityWriters, ExportForceReplacesOnlyAPreviousExport) {
  TempDir work;
  // A user's directory is not an export: --force refuses it and keeps the files.
  fs::create_directories(work / "mine");
  dew::test::write_text(work / "mine" / "notes.txt", "my notes");
  auto user_dir = run_dew("export " + q(tiny_gguf()) + " " + q(work / "mine") + " --force");
  EXPECT_EQ(user_dir.status, 1) << user_dir.output;
  EXPECT_TRUE(contains(user_dir.output, "not a previous Hugging Face export")) << user_dir.output;
  EXPECT_TRUE(dew::test::read_text(work / "mine" / "notes.txt") == "my notes");

  // A previous hf export is replaced.
  auto first = run_dew("export " + q(tiny_gguf()) + " " + q(work / "hf"));
  ASSERT_EQ(first.status, 0) << first.output;
  auto again = run_dew("export " + q(tiny_gguf()) + " " + q(work / "hf") + " --force");
  EXPECT_EQ(again.status, 0) << again.output;
  EXPECT_TRUE(fs::exists(work / "hf" / "config.json"));

  // GGUF: a previous GGUF file is replaced, any other file is not.
  auto gguf = run_dew("export " + q(tiny_gguf()) + " " + q(work / "m.gguf") + " --format gguf --type f32");
  ASSERT_EQ(gguf.status, 0) << gguf.output;
  auto gguf_again = run_dew("export " + q(tiny_gguf()) + " " + q(work / "m.gguf") + " --format gguf --type f32 --force");
  EXPECT_EQ(gguf_again.status, 0) << gguf_again.output;
  dew::test::write_text(work / "notes.txt", "keep me");
  auto over_text = run_dew("export " + q(tiny_gguf()) + " " + q(work / "notes.txt") + " --format gguf --force");
  EXPECT_EQ(over_text.status, 1) << over_text.output;
  EXPECT_TRUE(contains(over_text.output, "not a GGUF file")) << over_text.output;
  EXPECT_TRUE(dew::test::read_text(work / "notes.txt") == "keep me");
  auto over_hf = run_dew("export " + q(tiny_gguf()) + " " + q(work / "hf") + " --format gguf --force");
  EXPECT_EQ(over_hf.status, 1) << over_hf.output;
  EXPECT_TRUE(fs::exists(work / "hf" / "config.json"));

  // An existing empty directory as a GGUF destination: a clear error, not "Success".
  fs::create_directories(work / "empty");
  auto into_dir = run_dew("export " + q(tiny_gguf()) + " " + q(work / "empty") + " --format gguf");
  EXPECT_EQ(into_dir.status, 1) << into_dir.output;
  EXPECT_FALSE(contains(into_dir.output, "Success")) << into_dir.output;
  EXPECT_TRUE(contains(into_dir.output, "is a directory")) << into_dir.output;
  EXPECT_TRUE(fs::is_empty(work / "empty"));
  for (const auto& entry : fs::directory_iterator(work.path())) {
    EXPECT_NE(entry.path().filename().string()[0], '.') << "temporary left behind: " << entry.path();
  }
}

TEST_F(ReliabilityWriters, TrainRefusesARunDirectoryAnotherProcessHolds) {
  TempDir work;
  auto run = work / "run";
  fs::create_directories(run);
  // The protocol: an exclusive flock on RUN/.dew.lock, which records the holder's pid.
  int fd = ::open((run / ".dew.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  const std::string pid = std::to_string(::getpid());
  ASSERT_EQ(::write(fd, pid.data(), pid.size()), static_cast<ssize_t>(pid.size()));
  auto second = train(tokens_, run, "--set trainer.steps=2");
  EXPECT_EQ(second.status, 1) << second.output;
  EXPECT_TRUE(contains(second.output, "in use by another dew process (pid " + pid + ")")) << second.output;
  EXPECT_FALSE(fs::exists(run / "run.json"));
  EXPECT_FALSE(fs::exists(run / "tracking"));
  // Resuming a run that is being trained is refused the same way.
  auto held_run = copy_run(work / "held");
  int held_fd = ::open((held_run / ".dew.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(held_fd, 0);
  ASSERT_EQ(::flock(held_fd, LOCK_EX | LOCK_NB), 0);
  auto resume = run_dew("train lm --out " + q(held_run) + " --set trainer.steps=12");
  EXPECT_EQ(resume.status, 1) << resume.output;
  EXPECT_TRUE(contains(resume.output, "in use by another dew process")) << resume.output;
  EXPECT_FALSE(fs::exists(held_run / "12"));
  // Readers do not lock: eval works on a run being trained.
  auto eval = run_dew("eval " + q(held_run));
  EXPECT_EQ(eval.status, 0) << eval.output;
  ::close(held_fd);

  ::close(fd);  // the holder ends: the directory is free again, and the lock file does not make it "not empty"
  auto after = train(tokens_, run, "--set trainer.steps=2");
  EXPECT_EQ(after.status, 0) << after.output;
  EXPECT_TRUE(contains(after.output, "new run")) << after.output;
}

TEST_F(ReliabilityWriters, FreshRunThatFailsBeforeItsFirstCheckpointLeavesNothing) {
  TempDir work;
  auto run = work / "run";
  // A learning rate this large makes the loss non-finite within a few steps, before the first checkpoint.
  auto diverges = train(tokens_, run, "--set trainer.steps=8 --set trainer.checkpoint_every=8 --set optim.learning_rate=1e30");
  EXPECT_EQ(diverges.status, 1) << diverges.output;
  EXPECT_TRUE(contains(diverges.output, "non-finite")) << diverges.output;
  EXPECT_FALSE(fs::exists(run)) << "a directory the failed run created is removed";
  // An existing empty directory stays, empty of the run's files.
  fs::create_directories(run);
  auto again = train(tokens_, run, "--set trainer.steps=8 --set trainer.checkpoint_every=8 --set optim.learning_rate=1e30");
  EXPECT_EQ(again.status, 1) << again.output;
  EXPECT_TRUE(fs::is_directory(run));
  EXPECT_FALSE(fs::exists(run / "run.json"));
  EXPECT_FALSE(fs::exists(run / "tracking"));
  // The corrected command is a fresh run, not "a different run".
  auto corrected = train(tokens_, run, "--set trainer.steps=2");
  EXPECT_EQ(corrected.status, 0) << corrected.output;
  EXPECT_TRUE(contains(corrected.output, "new run")) << corrected.output;
}

// Whatever a kind writes is undone too: `dew train sft` on chat JSONL tokenizes it into RUN/data before its
// first step, and a start that then fails (no conversation fits data.seq_len) left that directory behind, so
// the corrected command was refused ("not empty and holds no run.json").
TEST_F(ReliabilityWriters, FreshSftRunThatFailsBeforeItsFirstStepLeavesNoDataBehind) {
  TempDir work;
  std::string chat;
  for (int i = 0; i < 8; ++i) {
    chat += R"({"messages": [{"role": "user", "content": "What is )" + std::to_string(i) +
            R"( plus one, written out in words?"}, {"role": "assistant", "content": "It is )" + std::to_string(i + 1) + R"(."}]})" "\n";
  }
  dew::test::write_text(work / "chat.jsonl", chat);
  auto sft = [&](const fs::path& run, const std::string& settings) {
    return run_dew("train sft --data " + q(work / "chat.jsonl") + " --init-from " + q(tiny_gguf()) + " --out " + q(run) +
                   " --set trainer.batch_size=2 --set trainer.peak_flops=1e9 --set trainer.device=cpu --set data.val_fraction=0" +
                   settings);
  };
  const auto run = work / "run";
  fs::create_directories(run);  // an existing empty directory: it stays, emptied of the run's files
  auto too_short = sft(run, " --set data.seq_len=4 --set trainer.steps=2");
  EXPECT_EQ(too_short.status, 1) << too_short.output;
  EXPECT_TRUE(contains(too_short.output, "fits seq_len 4")) << too_short.output;
  ASSERT_TRUE(fs::is_directory(run));
  EXPECT_TRUE(fs::is_empty(run)) << "left behind: " << fs::directory_iterator(run)->path();
  auto created = sft(work / "created", " --set data.seq_len=4 --set trainer.steps=2");
  EXPECT_EQ(created.status, 1) << created.output;
  EXPECT_FALSE(fs::exists(work / "created")) << "a directory the failed run created is removed";
  // The corrected command is a fresh run.
  auto corrected = sft(run, " --set data.seq_len=48 --set trainer.steps=1");
  EXPECT_EQ(corrected.status, 0) << corrected.output;
  EXPECT_TRUE(contains(corrected.output, "new run")) << corrected.output;
}

TEST_F(ReliabilityWriters, StaleTemporariesOfADeadWriterAreRemovedByTheNext) {
  TempDir work;
  const std::string dead = std::to_string(dead_pid()), live = std::to_string(::getpid());
  auto plant_dir = [](const fs::path& dir) {
    fs::create_directories(dir);
    dew::test::write_text(dir / "params.safetensors", std::string(1000, 'x'));
  };

  // Checkpoints and run.json in a run directory: cleaned when training resumes.
  auto run = copy_run(work / "run");
  plant_dir(run / (".12.partial-" + dead + "-0"));
  plant_dir(run / ("..12.partial-" + dead + "-0.partial-" + dead + "-1"));
  dew::test::write_text(run / (".run.json.tmp-" + dead + "-2"), "{");
  plant_dir(run / (".8.old-" + dead + "-3"));
  plant_dir(run / (".12.partial-" + live + "-0"));  // a live process's: kept
  auto resumed = run_dew("train lm --out " + q(run) + " --set trainer.steps=12");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_FALSE(fs::exists(run / (".12.partial-" + dead + "-0")));
  EXPECT_FALSE(fs::exists(run / ("..12.partial-" + dead + "-0.partial-" + dead + "-1")));
  EXPECT_FALSE(fs::exists(run / (".run.json.tmp-" + dead + "-2")));
  EXPECT_FALSE(fs::exists(run / (".8.old-" + dead + "-3")));
  EXPECT_TRUE(fs::exists(run / (".12.partial-" + live + "-0")));

  // A token directory: cleaned by the next tokenize into the same --out.
  plant_dir(work / (".tokens.partial-" + dead + "-0"));
  plant_dir(work / (".tokens.partial-" + live + "-7"));
  plant_dir(work / (".other.partial-" + dead + "-0"));  // another destination's: not this writer's business
  dew::test::write_text(work / "corpus.txt", "Once upon a time there was a little house by the sea.");
  auto tokenized = run_dew("tokenize --input " + q(work / "corpus.txt") + " --out " + q(work / "tokens"));
  ASSERT_EQ(tokenized.status, 0) << tokenized.output;
  EXPECT_FALSE(fs::exists(work / (".tokens.partial-" + dead + "-0")));
  EXPECT_TRUE(fs::exists(work / (".tokens.partial-" + live + "-7")));
  EXPECT_TRUE(fs::exists(work / (".other.partial-" + dead + "-0")));

  // Exports: an hf directory (and the nested model directory inside it) and a GGUF file.
  plant_dir(work / (".hf.partial-" + dead + "-0"));
  plant_dir(work / ("..hf.partial-" + dead + "-0.partial-" + dead + "-1"));
  dew::test::write_text(work / (".m.gguf.tmp-" + dead + "-0"), "GGUF");
  auto hf = run_dew("export " + q(tiny_gguf()) + " " + q(work / "hf"));
  ASSERT_EQ(hf.status, 0) << hf.output;
  auto gguf = run_dew("export " + q(tiny_gguf()) + " " + q(work / "m.gguf") + " --format gguf --type f32");
  ASSERT_EQ(gguf.status, 0) << gguf.output;
  EXPECT_FALSE(fs::exists(work / (".hf.partial-" + dead + "-0")));
  EXPECT_FALSE(fs::exists(work / ("..hf.partial-" + dead + "-0.partial-" + dead + "-1")));
  EXPECT_FALSE(fs::exists(work / (".m.gguf.tmp-" + dead + "-0")));
}

TEST_F(ReliabilityWriters, ZeroStepsSaysNoCheckpointWasWritten) {
  TempDir work;
  auto result = train(tokens_, work / "run", "--set trainer.steps=0");
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_FALSE(contains(result.output, "checkpoint ''")) << result.output;
  EXPECT_TRUE(contains(result.output, "no checkpoint written (trainer.steps = 0)")) << result.output;
}

TEST_F(ReliabilityWriters, BrokenNewestCheckpointNamesTheOlderOnes) {
  TempDir work;
  auto run = copy_run(work / "run");
  // An empty step directory (a user's mkdir, a crash outside dew) is refused with what to do.
  fs::create_directories(run / "12");
  auto eval = run_dew("eval " + q(run));
  EXPECT_EQ(eval.status, 1) << eval.output;
  EXPECT_TRUE(contains(eval.output, (run / "12").string())) << eval.output;
  EXPECT_TRUE(contains(eval.output, "older checkpoints: 8, 4")) << eval.output;
  EXPECT_TRUE(contains(eval.output, "--step 8")) << eval.output;
  auto resume = run_dew("train lm --out " + q(run) + " --set trainer.steps=16");
  EXPECT_EQ(resume.status, 1) << resume.output;
  EXPECT_TRUE(contains(resume.output, "remove '" + (run / "12").string() + "'")) << resume.output;
  EXPECT_FALSE(fs::exists(run / "16"));
  fs::remove(run / "12");

  // A corrupt newest checkpoint: the same hint, with the older step.
  fs::resize_file(run / "8" / "params.safetensors", 10);
  auto corrupt = run_dew("eval " + q(run));
  EXPECT_EQ(corrupt.status, 1) << corrupt.output;
  EXPECT_TRUE(contains(corrupt.output, "--step 4")) << corrupt.output;
  auto older = run_dew("eval " + q(run) + " --step 4");
  EXPECT_EQ(older.status, 0) << older.output;
}

TEST_F(ReliabilityWriters, PathUnderAFileIsNotADirectory) {
  TempDir work;
  dew::test::write_text(work / "file.txt", "text");
  auto out = train(tokens_, work / "file.txt" / "run", "--set trainer.steps=2");
  EXPECT_EQ(out.status, 1) << out.output;
  EXPECT_TRUE(contains(out.output, "'" + (work / "file.txt").string() + "' is not a directory")) << out.output;
  EXPECT_FALSE(contains(out.output, "does not exist")) << out.output;
  auto tokenize = run_dew("tokenize --input " + q(work / "file.txt") + " --out " + q(work / "file.txt" / "tokens"));
  EXPECT_EQ(tokenize.status, 1) << tokenize.output;
  EXPECT_TRUE(contains(tokenize.output, "'" + (work / "file.txt").string() + "' is not a directory")) << tokenize.output;
}

TEST_F(ReliabilityWriters, TokenizerTrainChecksOutBeforeTraining) {
  TempDir work;
  dew::test::write_text(work / "corpus.txt", "Once upon a time there was a little house by the sea.");
  dew::test::write_text(work / "file.txt", "text");
  auto result = run_dew("tokenizer train --input " + q(work / "corpus.txt") + " --out " + q(work / "file.txt") + " --vocab-size 300");
  EXPECT_EQ(result.status, 1) << result.output;
  EXPECT_TRUE(contains(result.output, "is not a directory")) << result.output;
  EXPECT_FALSE(contains(result.output, "learned")) << result.output;
  EXPECT_EQ(dew::test::read_text(work / "file.txt"), "text");
}
