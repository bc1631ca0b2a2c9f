#pragma once
// --reward-cmd CMD: an external program scores each rollout batch. dew runs `/bin/sh -c CMD` once per
// score() call, writes one JSON object per rollout to its stdin, one line each:
//   {"prompt": ..., "completion": "...", "ground_truth": "...", "extra_info": ..., "data_source": ...}
// and reads one number per line from its stdout, in the same order (blank lines are not skipped; surrounding
// spaces are). Anything it writes to stderr is passed over, except that its last ~2 KB are quoted when it
// fails. A non-zero exit, a death by signal, a wrong count of lines, a line that is not a number, or a
// non-finite number (nan, inf) throws dew::Error quoting the command, the problem and that stderr tail.
// A command still running after `timeout_seconds` (grpo.reward_timeout) is killed with its whole process
// group (it runs in a group of its own, so a pipeline or a script's children go too) and is an error naming
// the command and the limit. Completions that are not valid UTF-8 are sent with U+FFFD in place of the bad bytes.
#include <string>

#include "dew/objectives/rewards/reward.h"

namespace dew::objectives::rewards {

class CommandReward final : public Reward {
 public:
  // timeout_seconds > 0: how long one score() call may take.
  explicit CommandReward(std::string command, double timeout_seconds = kDefaultTimeoutSeconds, std::string name = "command");
  // A reward for a rollout batch from a local script or model answers in seconds; a minute is far beyond that
  // and still short enough that a hung command is noticed.
  static constexpr double kDefaultTimeoutSeconds = 60;
  std::string name() const override { return name_; }
  std::vector<double> score(const std::vector<RewardInput>& batch) override;
  const std::string& command() const { return command_; }

 private:
  std::string command_;
  double timeout_seconds_;
  std::string name_;
};

// What running a shell command gave back (the part of the runner tests exercise directly).
struct CommandOutput {
  std::string out;       // everything it wrote to stdout
  std::string err_tail;  // the last `stderr_tail_bytes` bytes it wrote to stderr
  int wait_status = 0;   // as waitpid reports it
  bool timed_out = false;  // it ran past the timeout and was killed (wait_status then says SIGKILL)
};

// Runs `/bin/sh -c command` in a process group of its own with `input` on its stdin, reading stdout and
// stderr while writing (so neither side blocks on a full pipe). A command that exits without reading all its
// input is not an error here. With timeout_seconds > 0, a command whose output is not complete by then is
// killed with its process group (SIGKILL) and reaped, and the result says timed_out.
CommandOutput run_shell_command(const std::string& command, const std::string& input,
                                std::size_t stderr_tail_bytes = 2048, double timeout_seconds = 0);

}  // namespace dew::objectives::rewards
