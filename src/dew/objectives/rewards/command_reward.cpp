#include "dew/objectives/rewards/command_reward.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <ctime>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dew/core/error.h"
#include "dew/core/printable.h"
#include "dew/objectives/rewards/builtin_rewards.h"

extern char** environ;

namespace dew::objectives::rewards {
namespace {

class Fd {
 public:
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { close(); }
  int get() const { return fd_; }
  void reset(int fd) {
    close();
    fd_ = fd;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct Pipe {
  Fd read, write;
  explicit Pipe(const std::string& command) {
    int fds[2];
    // CLOEXEC: the child gets only the ends dup2'ed onto 0/1/2, not these (nor another batch's).
    if (pipe2(fds, O_CLOEXEC) != 0) {
      dew::fail("--reward-cmd '", command, "': cannot create a pipe: ", std::strerror(errno));
    }
    read.reset(fds[0]);
    write.reset(fds[1]);
  }
};

// While it lives, a write to a pipe whose reader has gone returns EPIPE in this thread instead of killing
// the process with SIGPIPE; on leaving it consumes the SIGPIPE those writes left pending.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
  }
  ~SigpipeBlocked() {
    if (broken_) {
      timespec zero{0, 0};
      while (sigtimedwait(&set_, nullptr, &zero) > 0) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  void saw_epipe() { broken_ = true; }

 private:
  sigset_t set_, old_;
  bool broken_ = false;
};

// stderr as lines a person can read: each line's odd bytes escaped (printable), the line breaks kept.
std::string readable_lines(std::string_view text) {
  std::string out;
  while (true) {
    auto end = text.find('\n');
    out += printable(text.substr(0, end));
    if (end == std::string_view::npos) return out;
    out += '\n';
    text.remove_prefix(end + 1);
  }
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return str("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* name = strsignal(WTERMSIG(status));
    return str("was killed by signal ", WTERMSIG(status), " (", name ? name : "?", ")");
  }
  return str("ended with wait status ", status);
}

using Clock = std::chrono::steady_clock;

// Seconds since `start`.
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// `/bin/sh -c command` with the three pipes' ends on its stdin, stdout and stderr; those ends are closed here.
// posix_spawn rather than fork: glibc starts the child with clone(CLONE_VM | CLONE_VFORK), so a process
// holding gigabytes of model weights does not copy its page tables once per rollout batch.
pid_t spawn_shell(const std::string& command, Pipe& in, Pipe& out, Pipe& err) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in.read.get(), STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out.write.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err.write.get(), STDERR_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t no_signals, defaults;
  sigemptyset(&no_signals);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);  // a child like `head` must die quietly on a closed pipe, as in a shell
  posix_spawnattr_setsigmask(&attributes, &no_signals);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  // A process group of its own (its pid is the group's id), so that a timeout kills everything it started.
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::string shell = "/bin/sh", dash_c = "-c", body = command;
  char* argv[] = {shell.data(), dash_c.data(), body.data(), nullptr};
  pid_t pid = -1;
  int spawned = posix_spawn(&pid, "/bin/sh", &actions, &attributes, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0) dew::fail("--reward-cmd '", command, "': cannot start /bin/sh: ", std::strerror(spawned));
  in.read.close();
  out.write.close();
  err.write.close();
  return pid;
}

// Writes `input` to the command's stdin while reading its stdout into result.out and its stderr into
// `err_all` (its tail kept), until both are closed or the time limit passes (result.timed_out).
void exchange(const std::string& command, const std::string& input, Pipe& in, Pipe& out, Pipe& err,
              std::size_t stderr_tail_bytes, double timeout_seconds, Clock::time_point start, CommandOutput& result,
              std::string& err_all) {
  SigpipeBlocked guard;
  fcntl(in.write.get(), F_SETFL, fcntl(in.write.get(), F_GETFL) | O_NONBLOCK);
  std::size_t written = 0;
  if (input.empty()) in.write.close();
  bool out_open = true, err_open = true;
  char buffer[65536];
  while (out_open || err_open) {
    int wait_ms = -1;  // no limit
    if (timeout_seconds > 0) {
      const double left = timeout_seconds - seconds_since(start);
      if (left <= 0) {
        result.timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(std::min(std::ceil(left * 1000), 1e9));
    }
    pollfd fds[3];
    nfds_t count = 0;
    int in_slot = -1, out_slot = -1, err_slot = -1;
    if (in.write.get() >= 0) fds[in_slot = count++] = {in.write.get(), POLLOUT, 0};
    if (out_open) fds[out_slot = count++] = {out.read.get(), POLLIN, 0};
    if (err_open) fds[err_slot = count++] = {err.read.get(), POLLIN, 0};
    if (poll(fds, count, wait_ms) < 0) {
      if (errno == EINTR) continue;
      dew::fail("--reward-cmd '", command, "': poll failed: ", std::strerror(errno));
    }
    if (in_slot >= 0 && fds[in_slot].revents) {
      ssize_t n = ::write(in.write.get(), input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<std::size_t>(n);
      if (n < 0 && errno == EPIPE) guard.saw_epipe();
      // Done, or the command stopped reading: either way it gets end-of-file (or nothing more).
      if (written == input.size() || (n < 0 && errno != EAGAIN && errno != EINTR)) in.write.close();
    }
    auto drain = [&](int slot, Fd& fd, bool& open, std::string& sink) {
      if (slot < 0 || !fds[slot].revents) return;
      ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
      if (n > 0) {
        sink.append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        open = false;
      }
    };
    drain(out_slot, out.read, out_open, result.out);
    drain(err_slot, err.read, err_open, err_all);
    // Keep only the tail of stderr, trimming in large steps rather than on every read.
    if (err_all.size() > 4 * stderr_tail_bytes + sizeof buffer) err_all.erase(0, err_all.size() - stderr_tail_bytes);
  }
  in.write.close();
}

// Waits for the shell to end, within the time limit when its output ended in time (a shell that closed
// stdout and stderr may still run), and kills its whole group when the limit passed. Returns its wait status.
int reap_shell(const std::string& command, pid_t pid, double timeout_seconds, Clock::time_point start, bool& timed_out) {
  int status = 0;
  auto reaped = [&](int options) {  // true once the shell has ended and been reaped
    pid_t got;
    while ((got = waitpid(pid, &status, options)) < 0) {
      if (errno != EINTR) dew::fail("--reward-cmd '", command, "': waitpid failed: ", std::strerror(errno));
    }
    return got == pid;
  };
  bool ended = false;
  if (!timed_out && timeout_seconds > 0) {
    while (!(ended = reaped(WNOHANG))) {
      if (seconds_since(start) >= timeout_seconds) {
        timed_out = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  // SIGKILL to the whole group: the shell and whatever it started (a pipeline, a script's children), none of
  // which may catch it. ESRCH: all of them have ended already.
  if (timed_out) ::kill(-pid, SIGKILL);
  if (!ended) reaped(0);
  return status;
}

}  // namespace

CommandOutput run_shell_command(const std::string& command, const std::string& input, std::size_t stderr_tail_bytes,
                                double timeout_seconds) {
  const auto start = Clock::now();
  Pipe in(command), out(command), err(command);
  const pid_t pid = spawn_shell(command, in, out, err);
  CommandOutput result;
  std::string err_all;
  exchange(command, input, in, out, err, stderr_tail_bytes, timeout_seconds, start, result, err_all);
  result.wait_status = reap_shell(command, pid, timeout_seconds, start, result.timed_out);
  result.err_tail = err_all.size() > stderr_tail_bytes ? err_all.substr(err_all.size() - stderr_tail_bytes) : err_all;
  return result;
}

CommandReward::CommandReward(std::string command, double timeout_seconds, std::string name)
    : command_(std::move(command)), timeout_seconds_(timeout_seconds), name_(std::move(name)) {
  if (trim_whitespace(command_).empty()) dew::fail("--reward-cmd is empty; give a shell command that prints rewards");
  if (!(timeout_seconds_ > 0 && std::isfinite(timeout_seconds_))) {
    dew::fail("grpo.reward_timeout must be a positive number of seconds, got ", timeout_seconds_);
  }
}

std::vector<double> CommandReward::score(const std::vector<RewardInput>& batch) {
  if (batch.empty()) return {};
  std::string input;
  for (const auto& row : batch) {
    nlohmann::ordered_json line = {{"prompt", row.prompt},
                                   {"completion", row.completion},
                                   {"ground_truth", row.ground_truth},
                                   {"extra_info", row.extra_info},
                                   {"data_source", row.data_source}};
    input += line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    input += '\n';
  }
  auto result = run_shell_command(command_, input, 2048, timeout_seconds_);
  auto failure = [&](const std::string& problem) {
    std::string tail = trim_whitespace(result.err_tail).empty()
                           ? std::string(" (its stderr was empty)")
                           : str("; the end of its stderr:\n", readable_lines(trim_whitespace(result.err_tail)));
    dew::fail("--reward-cmd '", command_, "' ", problem, tail);
  };
  if (result.timed_out) {
    failure(str("did not finish scoring ", batch.size(), " completions within grpo.reward_timeout = ", timeout_seconds_,
                " seconds and was killed (with its process group). Make it answer sooner, or give it longer with "
                "--set grpo.reward_timeout=SECONDS"));
  }
  if (!WIFEXITED(result.wait_status) || WEXITSTATUS(result.wait_status) != 0) {
    failure(describe_status(result.wait_status) + " while scoring " + std::to_string(batch.size()) + " completions");
  }
  std::vector<double> scores;
  scores.reserve(batch.size());
  std::string_view out = result.out;
  std::size_t line_number = 0;
  while (!out.empty()) {
    auto end = out.find('\n');
    auto line = out.substr(0, end);
    out = end == std::string_view::npos ? std::string_view() : out.substr(end + 1);
    ++line_number;
    auto text = trim_whitespace(line);
    if (!text.empty() && text.front() == '+') text.remove_prefix(1);
    double value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
      failure(str("printed '", printable(trim_whitespace(line).substr(0, 80)), "' on stdout line ", line_number,
                  ", which is not a number; print one number per completion, one per line"));
    }
    if (!std::isfinite(value)) {
      failure(str("printed the non-finite reward '", printable(trim_whitespace(line)), "' on stdout line ",
                  line_number, "; rewards must be finite numbers"));
    }
    scores.push_back(value);
  }
  if (scores.size() != batch.size()) {
    failure(str("printed ", scores.size(), " numbers for ", batch.size(),
                " completions; it must print exactly one number per input line"));
  }
  return scores;
}

}  // namespace dew::objectives::rewards
