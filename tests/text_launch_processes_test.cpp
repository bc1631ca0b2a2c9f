// dew launch's supervision of real processes (src/dew/launch/child_processes.h), run in this test
// process with `sh -c` ranks: prefixed output, the first failure stopping the others, signals, the
// grace period, and nothing left running afterwards. Also the line splitter it uses.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dew/launch/child_processes.h"
#include "dew/launch/line_prefixer.h"
#include "test_support.h"
#include "wait_until.h"

namespace {
using namespace dew::launch;
using dew::test::error_of;
using dew::test::read_text;
using dew::test::TempDir;
using dew::test::wait_until;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::string::size_type start = 0, end;
  while ((end = text.find('\n', start)) != std::string::npos) {
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  return lines;
}

struct Supervised {
  int status = -1;
  std::string out, err;
};

// Runs one `sh -c script` per entry with the local contract (port 29999, never opened) plus `extra`.
Supervised supervise(const std::vector<std::string>& scripts, double grace = 30, std::vector<EnvVar> extra = {}) {
  TempDir dir;
  std::vector<RankCommand> ranks;
  for (std::size_t i = 0; i < scripts.size(); ++i) {
    LocalPlan plan;
    plan.nproc = static_cast<int>(scripts.size());
    plan.master_port = 29999;
    plan.extra = extra;
    plan.command = {"sh", "-c", scripts[i]};
    ranks.push_back(local_ranks(plan)[i]);
  }
  SupervisorOptions options;
  options.grace_seconds = grace;
  options.out_fd = ::open((dir / "out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  options.err_fd = ::open((dir / "err").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  Supervised result;
  result.status = run_ranks(ranks, options);
  ::close(options.out_fd);
  ::close(options.err_fd);
  result.out = read_text(dir / "out");
  result.err = read_text(dir / "err");
  return result;
}

TEST(LaunchLines, WholeLinesPrefixedAcrossReadsAndThePartialLastOne) {
  LinePrefixer lines("[rank 1] ");
  EXPECT_EQ(lines.feed("hel"), "");
  EXPECT_EQ(lines.feed("lo\nwor"), "[rank 1] hello\n");
  EXPECT_EQ(lines.feed("ld\n\nx"), "[rank 1] world\n[rank 1] \n");
  EXPECT_EQ(lines.finish(), "[rank 1] x\n");
  EXPECT_EQ(lines.finish(), "");
}

TEST(LaunchLines, OverlongLinesArePassedOnInPieces) {
  LinePrefixer lines("> ", 4);
  EXPECT_EQ(lines.feed("abcdefghij"), "> abcd\n> efgh\n");
  EXPECT_EQ(lines.feed("kl\n"), "> ijkl\n");  // exactly max_line: no empty piece after it
  EXPECT_EQ(lines.feed("abcd"), "");
  EXPECT_EQ(lines.feed("\n"), "> abcd\n");
}

TEST(LaunchChildren, EveryRankGetsItsEnvironmentAndPrefixedStreams) {
  std::vector<std::string> scripts(3, "echo hello $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT $EXTRA; "
                                      "echo oops $RANK >&2; printf 'tail %s' $RANK");
  auto r = supervise(scripts, 30, {{"EXTRA", "x y"}});
  EXPECT_EQ(r.status, 0) << r.err;
  auto out = lines_of(r.out);
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, (std::vector<std::string>{"[rank 0] hello 0 3 0 3 127.0.0.1 29999 x y", "[rank 0] tail 0",
                                           "[rank 1] hello 1 3 1 3 127.0.0.1 29999 x y", "[rank 1] tail 1",
                                           "[rank 2] hello 2 3 2 3 127.0.0.1 29999 x y", "[rank 2] tail 2"}));
  auto err = lines_of(r.err);
  std::sort(err.begin(), err.end());
  EXPECT_EQ(err, (std::vector<std::string>{"[rank 0] oops 0", "[rank 1] oops 1", "[rank 2] oops 2"}));
}

TEST(LaunchChildren, LinesOfDifferentRanksNeverMix) {
  const std::string line(3000, 'x');
  std::string script = "i=0; while [ $i -lt 300 ]; do echo \"$RANK$LINE\"; i=$((i+1)); done";
  auto r = supervise({script, script, script}, 30, {{"LINE", line}});
  ASSERT_EQ(r.status, 0) << r.err;
  auto out = lines_of(r.out);
  ASSERT_EQ(out.size(), 900u);
  for (const auto& l : out) {
    ASSERT_TRUE(l == "[rank 0] 0" + line || l == "[rank 1] 1" + line || l == "[rank 2] 2" + line) << l.substr(0, 40);
  }
}

// A rank that outlives what it should would print kNotStopped after its sleep; a stopped one never does,
// however loaded the machine.
const std::string kNotStopped = "; echo not stopped";

TEST(LaunchChildren, TheFirstFailureStopsTheOthersAndIsTheStatus) {
  auto r = supervise({"sleep 60" + kNotStopped, "echo last words; exit 3", "sleep 60" + kNotStopped});
  EXPECT_EQ(r.status, 3);
  EXPECT_FALSE(contains(r.out, "not stopped")) << r.out;
  EXPECT_TRUE(contains(r.out, "[rank 1] last words\n")) << r.out;
  EXPECT_TRUE(contains(r.err, "dew launch: rank 1 exited with status 3; stopping the other 2 rank(s) (SIGTERM, SIGKILL after 30 s)"))
      << r.err;
  EXPECT_EQ(lines_of(r.err).size(), 1u) << r.err;  // the others' endings are the stop's, not failures
}

TEST(LaunchChildren, ARankKilledByASignalGives128PlusIt) {
  auto r = supervise({"kill -9 $$", "sleep 60" + kNotStopped});
  EXPECT_EQ(r.status, 128 + 9);
  EXPECT_FALSE(contains(r.out, "not stopped")) << r.out;
  EXPECT_TRUE(contains(r.err, "dew launch: rank 0 killed by signal 9 (Killed)")) << r.err;
}

TEST(LaunchChildren, ARankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  TempDir dir;
  const std::string ready = (dir / "ready").string();
  auto r = supervise({"while [ ! -e '" + ready + "' ]; do sleep 0.05; done; exit 1",
                      "trap '' TERM; touch '" + ready + "'; sleep 60" + kNotStopped},
                     0.3);
  EXPECT_EQ(r.status, 1);
  EXPECT_FALSE(contains(r.out, "not stopped")) << r.out;
  EXPECT_TRUE(contains(r.err, "rank 1 still running 0.3 s after the stop signal; sending SIGKILL")) << r.err;
}

TEST(LaunchChildren, ASignalToTheLauncherIsPassedOnAndIsTheStatus) {
  // The rank signals its parent, which is this test process while run_ranks supervises. The ranks end
  // through a trap: a bare `sleep` can miss a SIGINT that lands while sh forks it (sh defers SIGINT there),
  // which would leave the test to the grace period.
  const std::string wait_for_int = "trap 'exit 7' INT; while :; do sleep 0.1; done";
  auto r = supervise({"kill -INT $PPID; " + wait_for_int, wait_for_int});
  EXPECT_EQ(r.status, 128 + SIGINT);
  EXPECT_TRUE(contains(r.err, "dew launch: got SIGINT; passing it to the 2 running rank(s) (SIGKILL after 30 s)")) << r.err;
  EXPECT_FALSE(contains(r.err, "rank 0 killed")) << r.err;
}

TEST(LaunchChildren, NothingARankStartedOutlivesTheLaunch) {
  TempDir dir;
  const std::string pid_file = (dir / "pid").string();
  // The background job writes to the rank's output: a launch that waited for it (rather than ending it)
  // would pass on its words.
  auto r = supervise({"(sleep 60" + kNotStopped + ") & echo $! > '" + pid_file + "'; echo started"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(contains(r.out, "not stopped")) << r.out;
  const pid_t orphan = std::stoi(read_text(pid_file));
  EXPECT_TRUE(wait_until([&] { return ::kill(orphan, 0) != 0; })) << "pid " << orphan << " still runs";
}

TEST(LaunchChildren, AMissingProgramIsAnErrorBeforeAnythingStarts) {
  RankCommand rank{0, {}, {"dew-no-such-program"}};
  auto e = error_of([&] { run_ranks({rank}, SupervisorOptions{}); });
  EXPECT_TRUE(contains(e, "command 'dew-no-such-program' is not on PATH")) << e;
}

TEST(LaunchChildren, EndingsAreDescribedAsTheShellWould) {
  EXPECT_EQ(describe({false, 3}), "exited with status 3");
  EXPECT_EQ(describe({true, 9}), "killed by signal 9 (Killed)");
  EXPECT_EQ(shell_status({true, 15}), 143);
  EXPECT_EQ(shell_status({false, 2}), 2);
}

}  // namespace
