#pragma once
// Supervising the ranks dew launch starts on this machine (training processes, or ssh clients that
// run them elsewhere), as torchrun does:
// - each rank runs in its own process group, stdin from /dev/null, stdout and stderr into pipes the
//   launcher reads; every line comes out prefixed "[rank R] " on the launcher's matching stream;
// - the first rank that fails (non-zero status or a signal) is named on stderr, the others get SIGTERM
//   and, if still running after the grace period, SIGKILL; the launcher's status is that first failure's
//   (128 + the signal for a signal);
// - SIGINT or SIGTERM to the launcher is passed to every rank (same grace rule; a second one kills at
//   once) and the launcher ends with 128 + that signal;
// - a rank gets SIGTERM if the launcher dies (PR_SET_PDEATHSIG), so none outlives it.
// Signals go to whole process groups, so what a rank started (sh -c's children, a Python worker) stops too.
#include <string>
#include <unistd.h>
#include <vector>

#include "dew/launch/launch_plan.h"

namespace dew::launch {

// How a process ended.
struct Ending {
  bool signaled = false;  // killed by a signal
  int code = 0;           // the exit status, or the signal
};

// "exited with status 3", "killed by signal 9 (Killed)".
std::string describe(const Ending& ending);

// The shell's status for it: the exit status, or 128 + the signal.
int shell_status(const Ending& ending);

struct SupervisorOptions {
  double grace_seconds = 30;     // SIGTERM -> SIGKILL
  int out_fd = STDOUT_FILENO;    // the ranks' stdout lines
  int err_fd = STDERR_FILENO;    // their stderr lines and the launcher's own messages
};

// Starts every rank, relays their output until all have ended, and returns the launcher's exit status
// (0 when every rank exited 0). Every rank's program is looked up on PATH before any starts; a missing
// one is an Error and nothing runs.
int run_ranks(const std::vector<RankCommand>& ranks, const SupervisorOptions& options);

}  // namespace dew::launch
