// `dew launch` end to end through the built binary: real processes, exit statuses, signals, Slurm's
// environment (faked) and ssh (a fake `ssh` on PATH that runs the remote command here, so the quoting
// is checked through both shells without a network). The planning itself is tested in
// text_launch_test.cpp, the supervision in text_launch_processes_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "dew/launch/shell_quote.h"
#include "test_support.h"

namespace {
using dew::launch::shell_quote;
using dew::test::run_command;
using dew::test::TempDir;
using dew::test::write_text;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string dew(const std::string& args) { return shell_quote(dew::test::dew_binary().string()) + " " + args; }

// A clean environment, so a test run inside a real Slurm job sees only the variables it sets.
std::string clean_env(const std::string& variables) { return "env -i PATH=\"$PATH\" HOME=\"$HOME\" " + variables + " "; }

std::vector<std::string> sorted_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string::size_type start = 0, end;
  while ((end = text.find('\n', start)) != std::string::npos) {
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

TEST(LaunchCommand, ThreeLocalRanksPrintPrefixedLinesWithTheirEnvironment) {
  auto r = run_command(dew("launch --nproc 3 --env GREETING=hello -- sh -c 'echo $GREETING $RANK $WORLD_SIZE $LOCAL_RANK $MASTER_ADDR $MASTER_PORT'"));
  ASSERT_EQ(r.status, 0) << r.output;
  auto lines = sorted_lines(r.output);
  ASSERT_EQ(lines.size(), 3u) << r.output;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string start = "[rank " + std::to_string(rank) + "] hello " + std::to_string(rank) + " 3 " +
                              std::to_string(rank) + " 127.0.0.1 ";
    EXPECT_EQ(lines[rank].rfind(start, 0), 0u) << lines[rank];
    const int port = std::stoi(lines[rank].substr(start.size()));  // a free port, the same for every rank
    EXPECT_GT(port, 0);
    EXPECT_EQ(lines[rank].substr(start.size()), lines[0].substr(lines[0].rfind(' ') + 1));
  }
}

TEST(LaunchCommand, AFailingRankStopsTheOthersAndGivesItsStatus) {
  // A rank left running would say so after its sleep: stopped, it never does (whatever the machine's load).
  auto r = run_command(dew("launch --nproc 3 -- sh -c 'if [ $RANK = 1 ]; then exit 3; fi; sleep 60; echo not stopped'"));
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_FALSE(contains(r.output, "not stopped")) << r.output;
  EXPECT_TRUE(contains(r.output, "dew launch: rank 1 exited with status 3")) << r.output;
}

TEST(LaunchCommand, ARankKilledByASignalGives128PlusTheSignal) {
  auto r = run_command(dew("launch --nproc 2 -- sh -c 'if [ $RANK = 0 ]; then kill -9 $$; fi; sleep 60'"));
  EXPECT_EQ(r.status, 137) << r.output;
  EXPECT_TRUE(contains(r.output, "dew launch: rank 0 killed by signal 9 (Killed)")) << r.output;
}

TEST(LaunchCommand, SigtermToTheLauncherReachesEveryRank) {
  // Each rank traps the signal to show it arrived, then says it is ready; rank 0 waits for both and
  // signals its parent, the launcher.
  TempDir dir;
  const std::string ready = shell_quote((dir / "ready-").string());
  auto r = run_command(dew("launch --nproc 2 -- sh -c " +
                           shell_quote("trap 'echo got TERM; exit 0' TERM; touch " + ready + "$RANK; "
                                       "if [ $RANK = 0 ]; then while [ ! -e " + ready + "1 ]; do sleep 0.05; done; kill -TERM $PPID; fi; "
                                       "while :; do sleep 0.1; done")));
  EXPECT_EQ(r.status, 128 + 15) << r.output;
  EXPECT_TRUE(contains(r.output, "dew launch: got SIGTERM; passing it to the 2 running rank(s)")) << r.output;
  EXPECT_TRUE(contains(r.output, "[rank 0] got TERM")) << r.output;
  EXPECT_TRUE(contains(r.output, "[rank 1] got TERM")) << r.output;
}

TEST(LaunchCommand, DryRunPrintsEveryRanksCommandLine) {
  auto r = run_command(dew("launch --nproc 2 --master-port 29600 --env 'NOTE=a b' --dry-run -- dew train lm --out 'runs/x y'"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output,
            "env MASTER_ADDR=127.0.0.1 MASTER_PORT=29600 RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 'NOTE=a b' dew train lm --out 'runs/x y'\n"
            "env MASTER_ADDR=127.0.0.1 MASTER_PORT=29600 RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 'NOTE=a b' dew train lm --out 'runs/x y'\n");
}

TEST(LaunchCommand, HostfileDryRunPrintsTheSshCommands) {
  TempDir dir;
  write_text(dir / "hosts", "# two machines\nn1 slots=2\nn2 slots=2\n");
  auto r = run_command("cd " + shell_quote(dir.path().string()) + " && " +
                       dew("launch --hostfile hosts --dry-run -- dew train lm"));
  ASSERT_EQ(r.status, 0) << r.output;
  auto lines = sorted_lines(r.output);
  ASSERT_EQ(lines.size(), 4u) << r.output;
  // The remote side starts in the launcher's directory (a temporary one: no character needs quoting).
  const std::string directory = std::filesystem::canonical(dir.path()).string();
  EXPECT_EQ(lines[0], "ssh -o BatchMode=yes n1 'cd " + directory +
                          " && env MASTER_ADDR=n1 MASTER_PORT=29500 RANK=0 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 dew train lm'");
  EXPECT_TRUE(contains(lines[3], "ssh -o BatchMode=yes n2 ")) << lines[3];
  EXPECT_TRUE(contains(lines[3], "MASTER_ADDR=n1 MASTER_PORT=29500 RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 dew train lm"))
      << lines[3];
}

TEST(LaunchCommand, SshRanksRunTheCommandAsWrittenOnEachHost) {
  TempDir dir;
  // Stands in for ssh: checks the options dew launch passes and runs the remote command with sh, as
  // the remote login shell would.
  write_text(dir / "ssh", "#!/bin/sh\n[ \"$1\" = -o ] && [ \"$2\" = BatchMode=yes ] || exit 255\necho \"on $3\" >&2\nexec sh -c \"$4\"\n");
  ::chmod((dir / "ssh").c_str(), 0755);
  auto r = run_command("PATH=" + shell_quote(dir.path().string()) + ":\"$PATH\" " +
                       dew("launch --hosts a,b --processes-per-host 2 --master-port 29700 -- "
                           "sh -c 'echo \"$RANK/$WORLD_SIZE $LOCAL_RANK/$LOCAL_WORLD_SIZE $MASTER_ADDR:$MASTER_PORT $1\"' "
                           "arg0 \"it's \\$HOME\""));
  ASSERT_EQ(r.status, 0) << r.output;
  auto lines = sorted_lines(r.output);
  ASSERT_EQ(lines.size(), 8u) << r.output;
  EXPECT_EQ(lines[0], "[rank 0] 0/4 0/2 a:29700 it's $HOME");
  EXPECT_EQ(lines[1], "[rank 0] on a");
  EXPECT_EQ(lines[6], "[rank 3] 3/4 1/2 a:29700 it's $HOME");
  EXPECT_EQ(lines[7], "[rank 3] on b");
}

const char* kSlurmTask =
    "SLURM_PROCID=3 SLURM_NTASKS=4 SLURM_LOCALID=1 SLURM_NODEID=1 'SLURM_TASKS_PER_NODE=2(x2)' "
    "'SLURM_JOB_NODELIST=gpu[07-08]' SLURM_JOB_ID=4242";

TEST(LaunchCommand, SlurmDryRunPrintsTheContract) {
  auto r = run_command(clean_env(kSlurmTask) + dew("launch --slurm --dry-run -- dew train lm --out runs/a"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output,
            "env MASTER_ADDR=gpu07 MASTER_PORT=19242 RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 dew train lm --out runs/a\n");
}

TEST(LaunchCommand, UnderSrunItBecomesTheCommand) {
  // No --slurm: SLURM_PROCID alone selects it. The command's status is the task's (it replaced dew).
  auto r = run_command(clean_env(kSlurmTask) + dew("launch -- sh -c 'echo $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT; exit 5'"));
  EXPECT_EQ(r.status, 5) << r.output;
  EXPECT_EQ(r.output, "3 4 1 2 gpu07 19242\n");
  r = run_command(clean_env("SLURM_PROCID=0 SLURM_NTASKS=x") + dew("launch --slurm -- true"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "dew: error: SLURM_NTASKS='x': 'x' is not a whole number")) << r.output;
}

TEST(LaunchCommand, BadCommandLinesNameTheFlagAndTheFix) {
  struct Case {
    std::string args, message;
  };
  for (const auto& c : std::vector<Case>{
           {"--nproc 0 -- true", "dew: error: --nproc 0 starts no process; give 1 or more"},
           {"--nproc 2", "dew: error: dew launch needs a command after '--'"},
           {"--nproc 2 --env NOEQUALS -- true", "dew: error: --env 'NOEQUALS' has no '='"},
           {"--hostfile /nonexistent/hosts -- true", "dew: error: cannot read --hostfile '/nonexistent/hosts'"},
           {"--nproc 2 --hosts a,b -- true", "dew: error: --nproc 2 is for processes on this machine"},
           {"-- true", "dew: error: dew launch needs --nproc N"},
           {"--nproc 2 -- dew-no-such-program", "dew: error: command 'dew-no-such-program' is not on PATH"},
       }) {
    auto r = run_command(clean_env("") + dew("launch " + c.args));
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << "\n" << r.output;
  }
}

}  // namespace
