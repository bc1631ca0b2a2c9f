// Data-parallel training as a user runs it: `dew train lm` started as 2 or 3 processes of one job on this
// host (Gloo over loopback), compared with one process taking the same global batch; resuming with another
// process count; and the failures a job must not hang on (a killed rank, a stopped rank, rank 0 refusing
// its run directory).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "dew/formats/safetensors.h"
#include "dew/training/checkpoint.h"
#include "image_test_support.h"
#include "run_test_support.h"
#include "test_support.h"
#include "wait_until.h"

namespace fs = std::filesystem;
using dew::test::run_command;
using dew::test::TempDir;
using dew::test::wait_until;

namespace {

// A byte-level token directory of repetitive English.
fs::path make_tokens(const fs::path& work) {
  std::string text;
  for (int i = 0; i < 80; ++i) text += "Once upon a time there was a little house by the sea, and a cat. ";
  dew::test::write_text(work / "corpus.txt", text);
  auto result = run_command(dew::test::dew_single_threaded("tokenize --input '" + (work / "corpus.txt").string() + "' --out '" +
                                                            (work / "tokens").string() + "' --val-fraction 0.2"));
  EXPECT_EQ(result.status, 0) << result.output;
  return work / "tokens";
}

// A TCP port nothing listens on now (the kernel's choice), for the job's rendezvous store.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// The shell line that starts `dew ARGS` as rank `rank` of `world` with torchrun's environment, output to
// DIR/rank<r>.log, its exit status to DIR/rank<r>.status, its pid to DIR/rank<r>.pid.
std::string rank_line(const fs::path& dir, int rank, int world, int port, const std::string& args) {
  const std::string base = (dir / ("rank" + std::to_string(rank))).string();
  return "( MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " WORLD_SIZE=" + std::to_string(world) +
         " RANK=" + std::to_string(rank) + " LOCAL_RANK=" + std::to_string(rank) + " LOCAL_WORLD_SIZE=" + std::to_string(world) +
         " " + dew::test::dew_single_threaded(args) + " > '" + base + ".log' 2>&1 & echo $! > '" + base + ".pid'; wait $!; echo $? > '" +
         base + ".status' ) &";
}

struct RankResult {
  int status;
  std::string output;
};

// Runs `dew ARGS` as `world` processes of one job and waits for all of them.
std::vector<RankResult> run_ranks(const fs::path& dir, int world, const std::string& args) {
  const int port = free_port();
  std::string script;
  for (int r = 0; r < world; ++r) script += rank_line(dir, r, world, port, args) + "\n";
  script += "wait\n";
  dew::test::write_text(dir / "job.sh", script);
  run_command("sh '" + (dir / "job.sh").string() + "'");
  std::vector<RankResult> out;
  for (int r = 0; r < world; ++r) {
    const std::string base = (dir / ("rank" + std::to_string(r))).string();
    out.push_back({std::stoi(dew::test::read_text(base + ".status")), dew::test::read_text(base + ".log")});
  }
  return out;
}

std::string train_args(const fs::path& tokens, const fs::path& run, const std::string& extra) {
  return "train lm --data '" + tokens.string() + "' --out '" + run.string() + "'" + dew::test::kTinyModelFlags +
         " --set trainer.ema_decay=0 --set trainer.eval_batches=2" + extra;
}

std::vector<double> logged(const fs::path& run, const std::string& name) {
  std::vector<double> out;
  std::istringstream in(dew::test::read_text(run / "tracking" / "scalars.jsonl"));
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["scalars"].contains(name)) out.push_back(j["scalars"][name].get<double>());
  }
  return out;
}

// The largest |a - b| over every parameter of two checkpoints (one file, or a sharded run's files).
double largest_difference(const fs::path& a, const fs::path& b) {
  const dew::training::Checkpoint ca(a), cb(b);
  double worst = 0;
  for (const auto& name : ca.params().names()) {
    const at::Tensor x = ca.params().whole(name).to(at::kDouble), y = cb.params().whole(name).to(at::kDouble);
    worst = std::max(worst, (x - y).abs().max().item<double>());
  }
  return worst;
}

// Whether two checkpoints hold bit for bit the same tensors in params, optimizer and ema, however many
// processes wrote each.
bool identical_checkpoints(const fs::path& a, const fs::path& b) {
  const dew::training::Checkpoint ca(a), cb(b);
  bool same = ca.has_ema() == cb.has_ema();
  auto compare = [&](const dew::training::CheckpointPart& x, const dew::training::CheckpointPart& y) {
    if (x.names() != y.names()) {
      ADD_FAILURE() << x.source() << " and " << y.source() << " hold other tensors";
      same = false;
      return;
    }
    for (const auto& name : x.names()) {
      const at::Tensor u = x.whole(name), v = y.whole(name);
      if (u.sizes() != v.sizes() || u.scalar_type() != v.scalar_type() || !at::equal(u, v)) {
        ADD_FAILURE() << name << " differs between " << x.source() << " and " << y.source();
        same = false;
      }
    }
  };
  compare(ca.params(), cb.params());
  compare(ca.optimizer(), cb.optimizer());
  if (ca.has_ema() && cb.has_ema()) compare(ca.ema(), cb.ema());
  return same;
}

// A file's bytes; a missing file fails the test (two missing files must not compare equal).
std::string file_bytes(const fs::path& p) {
  EXPECT_TRUE(fs::is_regular_file(p)) << p;
  return dew::test::read_text(p);
}

// Trains the same 4 steps twice: WORK/one as one process taking `world` micro-batches of one row per
// step, and WORK/job_run as `world` processes of one row each (global batch `world` in both). Returns the
// job's ranks.
std::vector<RankResult> alone_and_together(const fs::path& work, const fs::path& tokens, int world) {
  const std::string common = " --set trainer.batch_size=" + std::to_string(world) + " --set trainer.steps=4";
  auto single = run_command(dew::test::dew_single_threaded(
      train_args(tokens, work / "one", common + " --set trainer.grad_accum=" + std::to_string(world))));
  EXPECT_EQ(single.status, 0) << single.output;
  fs::create_directories(work / "job");
  auto ranks = run_ranks(work / "job", world, train_args(tokens, work / "job_run", common));
  for (const auto& r : ranks) EXPECT_EQ(r.status, 0) << r.output;
  return ranks;
}

}  // namespace

// Two processes with one row each take bit for bit the step one process takes with two micro-batches of
// one row: the same rows (the loaders interleave them by rank), and a sum of two gradients is the same in
// either order, so nothing but the reduction order could differ, and for two it cannot.
TEST(DistributedTraining, TwoProcessesTakeTheStepOfOneBitForBit) {
  TempDir work;
  auto ranks = alone_and_together(work.path(), make_tokens(work.path()), 2);
  const fs::path two = work / "job_run";
  EXPECT_NE(ranks[0].output.find("over 2 processes (data parallel)"), std::string::npos) << ranks[0].output;
  EXPECT_EQ(ranks[1].output, "") << "only rank 0 speaks";
  EXPECT_TRUE(file_bytes(work / "one" / "4" / "params.safetensors") == file_bytes(two / "4" / "params.safetensors"));
  EXPECT_TRUE(file_bytes(work / "one" / "4" / "optimizer.safetensors") == file_bytes(two / "4" / "optimizer.safetensors"));
  // The logged loss is the global batch's: one process sums the two micro-batches in float32, the job in
  // float64 after each rank's float32 sum, so they agree to float32 rounding of a sum of two terms.
  auto a = logged(work / "one", "loss"), b = logged(two, "loss");
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 4 * 1.2e-7 * a[i]);
  // Evaluation is summed over the ranks: the same whole-split statistics (summed in another order).
  auto va = logged(work / "one", "val/ce"), vb = logged(two, "val/ce");
  ASSERT_EQ(va.size(), vb.size());
  ASSERT_FALSE(va.empty());
  for (std::size_t i = 0; i < va.size(); ++i) EXPECT_NEAR(va[i], vb[i], 1e-5 * va[i]);
}

// Three processes sum three gradients in Gloo's ring order rather than one process's left-to-right order:
// float32 reassociation of a 3-term sum, about 2 ulp of the gradient. AdamW turns gradients into updates
// of at most about learning_rate per element per step (|m / sqrt(v)| <= 1 in the first steps), so after S
// steps the weights agree within S * learning_rate even where a reassociated near-zero gradient flips an
// update's sign, and the losses agree closely.
TEST(DistributedTraining, ThreeProcessesTakeTheStepOfOneWithinReassociation) {
  TempDir work;
  alone_and_together(work.path(), make_tokens(work.path()), 3);
  const fs::path three = work / "job_run";
  const double learning_rate = 0.01, steps = 4;
  EXPECT_LE(largest_difference(work / "one" / "4", three / "4"), steps * learning_rate);
  auto a = logged(work / "one", "loss"), b = logged(three, "loss");
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-3 * a[i]);
}

// A run saved by 2 processes resumes with 1 (and the data position, counted globally, carries over): the
// result is bit for bit the uninterrupted one-process run with the same global batch.
TEST(DistributedTraining, ResumesWithAnotherProcessCount) {
  TempDir work;
  auto tokens = make_tokens(work.path());
  // The schedule is that of 8 steps in both (optim.decay_steps), so stopping at 4 changes nothing.
  const std::string common = " --set trainer.batch_size=2 --set optim.decay_steps=8";
  auto straight = run_command(dew::test::dew_single_threaded(
      train_args(tokens, work / "straight", common + " --set trainer.grad_accum=2 --set trainer.steps=8")));
  ASSERT_EQ(straight.status, 0) << straight.output;
  fs::create_directories(work / "job");
  auto ranks = run_ranks(work / "job", 2, train_args(tokens, work / "mixed", common + " --set trainer.steps=4"));
  for (const auto& r : ranks) ASSERT_EQ(r.status, 0) << r.output;
  auto resumed = run_command(dew::test::dew_single_threaded(
      train_args(tokens, work / "mixed", common + " --set trainer.grad_accum=2 --set trainer.steps=8")));
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming"), std::string::npos) << resumed.output;
  EXPECT_TRUE(file_bytes(work / "straight" / "8" / "params.safetensors") == file_bytes(work / "mixed" / "8" / "params.safetensors"));
}

namespace {

// Starts a long 2-process job, waits until rank 0 has logged a step, sends `signal_to_send` to rank 1, and
// returns rank 0's result and whether it exited within kExitDeadline of the signal.
struct FailureOutcome {
  RankResult rank0;
  bool rank0_exited;
};

// Far below trainer.timeout_seconds' default (600 s): a rank that exits within it did not wait for that timeout.
constexpr std::chrono::seconds kExitDeadline{120};

FailureOutcome fail_rank_one(const fs::path& work, const fs::path& tokens, const std::string& extra, int signal_to_send) {
  const fs::path dir = work / "job";
  fs::create_directories(dir);
  const int port = free_port();
  const std::string args = train_args(tokens, work / "run", " --set trainer.steps=100000 --set trainer.log_every=1" + extra);
  dew::test::write_text(dir / "job.sh", rank_line(dir, 0, 2, port, args) + "\n" + rank_line(dir, 1, 2, port, args) + "\nwait\n");
  std::thread job([&] { run_command("sh '" + (dir / "job.sh").string() + "'"); });
  auto text_of = [&](const char* name) {
    std::ifstream file(dir / name);
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  };
  // The shell writes a pid or status file in two moves (create, then the number): wait for the number.
  auto has_number = [&](const char* name) { return fs::exists(dir / name) && fs::file_size(dir / name) > 0; };
  auto kill_rank = [&](const char* pid_file, int signal) {
    if (has_number(pid_file)) ::kill(std::stoi(text_of(pid_file)), signal);
  };
  const bool stepping = wait_until([&] { return text_of("rank0.log").find("step 2/") != std::string::npos && has_number("rank1.pid"); },
                                   std::chrono::seconds(120), std::chrono::milliseconds(100));
  bool exited = false;
  if (stepping) {
    kill_rank("rank1.pid", signal_to_send);
    exited = wait_until([&] { return has_number("rank0.status"); }, kExitDeadline, std::chrono::milliseconds(50));
    // A rank that is not stopped exits by itself, maybe a moment after rank 0 (on a loaded machine its
    // shutdown can take a while): wait for its status before the kill below could overwrite it.
    if (signal_to_send != SIGSTOP) wait_until([&] { return has_number("rank1.status"); });
  }
  if (!exited) kill_rank("rank0.pid", SIGKILL);  // it is still there (or never stepped)
  kill_rank("rank1.pid", SIGKILL);  // as is a stopped rank
  job.join();
  EXPECT_TRUE(stepping) << "rank 0 did not log step 2 within 120 s: " << text_of("rank0.log");
  return {{exited ? std::stoi(text_of("rank0.status")) : -1, text_of("rank0.log")}, exited};
}

}  // namespace

TEST(DistributedTraining, AKilledRankIsNamedAtOnce) {
  TempDir work;
  auto tokens = make_tokens(work.path());
  auto outcome = fail_rank_one(work.path(), tokens, "", SIGKILL);
  // The connection closes at once; only the heartbeat check waits (the collective's timeout is 600 s).
  EXPECT_TRUE(outcome.rank0_exited) << "rank 0 still ran " << kExitDeadline.count() << " s after rank 1 was killed";
  EXPECT_EQ(outcome.rank0.status, 1) << outcome.rank0.output;
  EXPECT_NE(outcome.rank0.output.find("rank 1 stopped answering"), std::string::npos) << outcome.rank0.output;
}

TEST(DistributedTraining, AStoppedRankFailsTheOthersAfterTheTimeout) {
  TempDir work;
  auto tokens = make_tokens(work.path());
  auto outcome = fail_rank_one(work.path(), tokens, " --set trainer.timeout_seconds=3", SIGSTOP);
  // A stopped rank keeps its connections open: only the 3-s timeout ends rank 0's wait, well within the deadline.
  EXPECT_TRUE(outcome.rank0_exited) << "rank 0 still ran " << kExitDeadline.count() << " s after rank 1 was stopped";
  EXPECT_EQ(outcome.rank0.status, 1) << outcome.rank0.output;
  EXPECT_NE(outcome.rank0.output.find("rank 1 stopped answering"), std::string::npos) << outcome.rank0.output;
}

TEST(DistributedTraining, RankZerosSetUpErrorReachesTheOthers) {
  TempDir work;
  auto tokens = make_tokens(work.path());
  fs::create_directories(work / "taken");
  dew::test::write_text(work / "taken" / "notes.txt", "not a run");
  fs::create_directories(work / "job");
  auto ranks = run_ranks(work / "job", 2, train_args(tokens, work / "taken", " --set trainer.steps=2"));
  EXPECT_EQ(ranks[0].status, 1) << ranks[0].output;
  EXPECT_NE(ranks[0].output.find("not empty"), std::string::npos) << ranks[0].output;
  EXPECT_EQ(ranks[1].status, 1) << ranks[1].output;
  EXPECT_NE(ranks[1].output.find("rank 0 failed: "), std::string::npos) << ranks[1].output;
  EXPECT_NE(ranks[1].output.find("not empty"), std::string::npos) << ranks[1].output;
}

TEST(DistributedTraining, RefusesWhatCannotSplitOverTheProcesses) {
  TempDir work;
  auto tokens = make_tokens(work.path());
  fs::create_directories(work / "job");
  auto uneven = run_ranks(work / "job", 3, train_args(tokens, work / "run", " --set trainer.batch_size=4 --set trainer.steps=2"));
  EXPECT_EQ(uneven[0].status, 1);
  EXPECT_NE(uneven[0].output.find("trainer.batch_size (4) must be a multiple of trainer.grad_accum (1) x 3 processes"),
            std::string::npos) << uneven[0].output;
  auto none = run_ranks(work / "job", 2, train_args(tokens, work / "run", " --set trainer.parallel=none --set trainer.steps=2"));
  EXPECT_EQ(none[1].status, 1);
  EXPECT_NE(none[1].output.find("trainer.parallel is none"), std::string::npos) << none[1].output;
  EXPECT_FALSE(fs::exists(work / "run" / "run.json"));
}

// Every kind trains data parallel through the same trainer: an image diffusion run of 2 processes with one
// image each equals one process with two micro-batches of one image bit for bit, since each image gets the
// noise of its micro-batch's place among all the job's micro-batches (MicroBatchIndex::next_stream_key).
TEST(DistributedTraining, ImageDiffusionTakesTheStepOfOneProcess) {
  TempDir work;
  fs::create_directories(work / "images");
  dew::test::write_idx(work / "images", "train", 32);
  dew::test::write_idx(work / "images", "t10k", 8);
  const std::string args = " --data '" + (work / "images").string() +
                           "' --set model.dim=32 --set model.depth=2 --set model.heads=2 --set model.patch_size=2"
                           " --set trainer.batch_size=2 --set trainer.steps=3 --set trainer.eval_every=3 --set trainer.eval_batches=1"
                           " --set trainer.device=cpu --set trainer.peak_flops=1 --set preview.per_class=1 --set sample.steps=2";
  auto single = run_command(dew::test::dew_single_threaded("train diffusion --out '" + (work / "one").string() + "'" + args +
                                                            " --set trainer.grad_accum=2"));
  ASSERT_EQ(single.status, 0) << single.output;
  fs::create_directories(work / "job");
  auto ranks = run_ranks(work / "job", 2, "train diffusion --out '" + (work / "two").string() + "'" + args);
  for (const auto& r : ranks) ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(file_bytes(work / "one" / "3" / "params.safetensors") == file_bytes(work / "two" / "3" / "params.safetensors"));
  EXPECT_TRUE(file_bytes(work / "one" / "3" / "ema.safetensors") == file_bytes(work / "two" / "3" / "ema.safetensors"));
  EXPECT_TRUE(fs::exists(work / "two" / "samples" / "step-3.png")) << "rank 0 draws the preview";
}

// SIGTERM to one process stops every process after the same step, with a checkpoint of that step: the
// stop requests are summed with the step's loss, so no rank runs ahead into a collective the others left.
TEST(DistributedTraining, ASignalToOneRankStopsAllAtTheSameStep) {
  TempDir work;
  auto tokens = make_tokens(work.path());
  auto outcome = fail_rank_one(work.path(), tokens, "", SIGTERM);
  EXPECT_EQ(outcome.rank0.status, 130) << outcome.rank0.output;
  EXPECT_NE(outcome.rank0.output.find("stopped by signal"), std::string::npos) << outcome.rank0.output;
  EXPECT_EQ(std::stoi(dew::test::read_text(work / "job" / "rank1.status")), 130);
  auto steps = dew::training::checkpoint_steps(work / "run");
  ASSERT_FALSE(steps.empty());
  EXPECT_NE(outcome.rank0.output.find("after step " + std::to_string(steps.back()) + ";"), std::string::npos) << outcome.rank0.output;
}

// The way a user starts it: `dew launch --nproc 2 -- dew train lm ...`. Rank 0 speaks for the job (its
// lines prefixed), rank 1 is silent, and the run is the one-process run with the same global batch.
TEST(DistributedTraining, DewLaunchTrainsAsTheUserWould) {
  TempDir work;
  auto tokens = make_tokens(work.path());
  const std::string common = " --set trainer.batch_size=2 --set trainer.steps=4";
  auto single = run_command(dew::test::dew_single_threaded(train_args(tokens, work / "one", common + " --set trainer.grad_accum=2")));
  ASSERT_EQ(single.status, 0) << single.output;
  const std::string dew = "'" + dew::test::dew_binary().string() + "'";
  auto launched = run_command("DEW_THREADS=1 " + dew + " launch --nproc 2 -- " + dew + " " + train_args(tokens, work / "two", common));
  ASSERT_EQ(launched.status, 0) << launched.output;
  EXPECT_NE(launched.output.find("[rank 0] training lm: "), std::string::npos) << launched.output;
  EXPECT_NE(launched.output.find("over 2 processes (data parallel)"), std::string::npos) << launched.output;
  EXPECT_EQ(launched.output.find("[rank 1]"), std::string::npos) << launched.output;
  EXPECT_TRUE(file_bytes(work / "one" / "4" / "params.safetensors") == file_bytes(work / "two" / "4" / "params.safetensors"));
}

namespace {

// The "weights and optimizer state N <unit>B" figure of a trainer's start line, in bytes.
double state_bytes(const std::string& output) {
  const std::string key = "weights and optimizer state ";
  const auto at = output.find(key);
  if (at == std::string::npos) return -1;
  std::istringstream in(output.substr(at + key.size()));
  double value = 0;
  std::string unit;
  in >> value >> unit;
  const double scale = unit.rfind("kB", 0) == 0 ? 1e3 : unit.rfind("MB", 0) == 0 ? 1e6 : unit.rfind("GB", 0) == 0 ? 1e9 : 1;
  return value * scale;
}

}  // namespace

// Sharded (trainer.parallel = fsdp): parameters, gradients, optimizer state and EMA cut over the processes,
// each layer gathered for its call and recomputed in backward. Without clipping, two processes take bit for
// bit the step of one process with two micro-batches (the layer is recomputed with the same arithmetic; the
// gradient sum of two is order-free), EMA and optimizer state included, and each process holds half the
// weights and optimizer state. With clipping the global norm is summed from the shards' in another order,
// which moves the clipping coefficient by float32 rounding.
TEST(DistributedTraining, ShardedTwoProcessesTakeTheStepOfOne) {
  TempDir work;
  auto tokens = make_tokens(work.path());
  const std::string common = " --set trainer.batch_size=2 --set trainer.steps=4 --set trainer.ema_decay=0.9";
  for (const std::string clip : {"0", "1"}) {
    const fs::path one = work / ("one" + clip), two = work / ("two" + clip);
    const std::string flags = common + " --set optim.grad_clip_norm=" + clip;
    auto single = run_command(dew::test::dew_single_threaded(train_args(tokens, one, flags + " --set trainer.grad_accum=2")));
    ASSERT_EQ(single.status, 0) << single.output;
    fs::create_directories(work / ("job" + clip));
    auto ranks = run_ranks(work / ("job" + clip), 2, train_args(tokens, two, flags + " --set trainer.parallel=fsdp"));
    for (const auto& r : ranks) ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_NE(ranks[0].output.find("over 2 processes (sharded)"), std::string::npos) << ranks[0].output;
    // Half of the whole: row blocks of equal size, the tiny model's odd shapes padded by at most a row each.
    const double ratio = state_bytes(ranks[0].output) / state_bytes(single.output);
    EXPECT_NEAR(ratio, 0.5, 0.05) << ranks[0].output << single.output;
    // Each process wrote its own rows, rank 0 the manifest; nothing whole.
    EXPECT_TRUE(fs::exists(two / "4" / "shards.json"));
    for (const char* part : {"params", "optimizer", "ema"}) {
      EXPECT_FALSE(fs::exists(two / "4" / (std::string(part) + ".safetensors"))) << part;
      for (const char* rank : {".rank00000-of-00002", ".rank00001-of-00002"}) {
        EXPECT_TRUE(fs::exists(two / "4" / (std::string(part) + rank + ".safetensors"))) << part << rank;
      }
    }
    if (clip == "0") {
      EXPECT_TRUE(identical_checkpoints(one / "4", two / "4"));
      // Readers load the sharded checkpoint whole (`dew eval`, `generate`, `export` share the loading): the
      // two-process run evaluates exactly as the one-process run does.
      auto eval_one = run_command(dew::test::dew_single_threaded("eval '" + one.string() + "' --json"));
      auto eval_two = run_command(dew::test::dew_single_threaded("eval '" + two.string() + "' --json"));
      ASSERT_EQ(eval_two.status, 0) << eval_two.output;
      ASSERT_EQ(eval_one.status, 0) << eval_one.output;
      const auto ce_one = nlohmann::json::parse(eval_one.output)["ce"];
      ASSERT_TRUE(ce_one.is_number()) << eval_one.output;
      EXPECT_EQ(ce_one, nlohmann::json::parse(eval_two.output)["ce"]) << eval_two.output;
      // Resumed on the same number of processes, a sharded run continues exactly.
      const fs::path resumed = work / "resumed";
      fs::create_directories(work / "job-resumed");
      for (const char* steps : {"2", "4"}) {
        auto again = run_ranks(work / "job-resumed", 2,
                               train_args(tokens, resumed, flags + " --set trainer.parallel=fsdp --set optim.decay_steps=4 --set trainer.steps=" + steps));
        for (const auto& r : again) ASSERT_EQ(r.status, 0) << r.output;
      }
      EXPECT_TRUE(identical_checkpoints(two / "4", resumed / "4"));
    } else {
      // A clipping coefficient off by a few float32 ulps (relative 1e-6 at most) scales each update by as
      // much at most (Adam's normalisation cancels most of it): the weights agree within steps x
      // learning_rate x 1e-5.
      EXPECT_LE(largest_difference(one / "4", two / "4"), 4 * 0.01 * 1e-5);
      EXPECT_GT(logged(two, "grad_norm").front(), 1.0) << "clipping was active";
    }
  }
}

// A sharded run's checkpoints are read whole or by rows: 3 sharded processes resume what 2 wrote (each reading
// the rows it now holds), then one process resumes what 3 wrote, and the run ends where one process alone ends, to float32
// reassociation of the 3-process gradient sums (see ThreeProcessesTakeTheStepOfOneWithinReassociation).
TEST(DistributedTraining, ShardedRunsResumeWithAnyProcessCount) {
  TempDir work;
  auto tokens = make_tokens(work.path());
  const std::string common = " --set trainer.batch_size=6 --set optim.decay_steps=9 --set optim.grad_clip_norm=0";
  auto straight = run_command(dew::test::dew_single_threaded(
      train_args(tokens, work / "straight", common + " --set trainer.grad_accum=6 --set trainer.steps=9")));
  ASSERT_EQ(straight.status, 0) << straight.output;
  fs::create_directories(work / "job2");
  fs::create_directories(work / "job3");
  const std::string sharded = common + " --set trainer.parallel=fsdp --set trainer.grad_accum=3";
  auto two = run_ranks(work / "job2", 2, train_args(tokens, work / "mixed", sharded + " --set trainer.steps=3"));
  for (const auto& r : two) ASSERT_EQ(r.status, 0) << r.output;
  auto three = run_ranks(work / "job3", 3, train_args(tokens, work / "mixed", common +
                                                       " --set trainer.parallel=fsdp --set trainer.grad_accum=2 --set trainer.steps=6"));
  for (const auto& r : three) ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(three[0].output.find("resuming from"), std::string::npos) << three[0].output;
  EXPECT_EQ(nlohmann::json::parse(dew::test::read_text(work / "mixed" / "6" / "shards.json"))["world"], 3);
  auto one = run_command(dew::test::dew_single_threaded(
      train_args(tokens, work / "mixed", common + " --set trainer.grad_accum=6 --set trainer.steps=9")));
  ASSERT_EQ(one.status, 0) << one.output;
  EXPECT_LE(largest_difference(work / "straight" / "9", work / "mixed" / "9"), 9 * 0.01);
  // `dew generate` reads the sharded run's checkpoint like any other.
  auto generated = run_command(dew::test::dew_single_threaded("generate '" + (work / "mixed").string() +
                                                               "' --prompt 'Once' --max-new-tokens 4"));
  EXPECT_EQ(generated.status, 0) << generated.output;
  // `dew generate` reads a checkpoint that 3 processes wrote, assembling the rows (through
  // training::load_checkpoint_weights, which `dew eval` and `dew export` share).
  auto from_six = run_command(dew::test::dew_single_threaded("generate '" + (work / "mixed").string() +
                                                              "' --step 6 --prompt 'Once' --max-new-tokens 4"));
  EXPECT_EQ(from_six.status, 0) << from_six.output;
}

TEST(DistributedTraining, ShardingRefusesWhatItCannotShard) {
  TempDir work;
  fs::create_directories(work / "images");
  dew::test::write_idx(work / "images", "train", 16);
  fs::create_directories(work / "job");
  auto image = run_ranks(work / "job", 2, "train classifier --data '" + (work / "images").string() + "' --out '" +
                                              (work / "run").string() +
                                              "' --set trainer.batch_size=4 --set trainer.steps=1 --set trainer.device=cpu"
                                              " --set trainer.peak_flops=1 --set trainer.parallel=fsdp");
  EXPECT_EQ(image[0].status, 1);
  EXPECT_NE(image[0].output.find("has no layer stack; use trainer.parallel = ddp"), std::string::npos) << image[0].output;
}
