#include "dew/launch/child_processes.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <optional>

#include "dew/core/error.h"
#include "dew/core/printable.h"
#include "dew/launch/line_prefixer.h"
#include "dew/launch/program.h"
#include "dew/launch/signal_relay.h"

namespace dew::launch {

namespace {
using Clock = std::chrono::steady_clock;

// Everything a rank's exec needs, built before fork: between fork and exec only async-signal-safe
// calls are allowed (the launcher may have threads, and one of them may hold malloc's lock).
struct Prepared {
  std::string program;
  std::vector<std::string> argv, environment;
  std::vector<char*> argv_pointers, environment_pointers;
};

Prepared prepare(const RankCommand& rank) {
  Prepared p;
  p.program = find_program(rank.argv.at(0));
  p.argv = rank.argv;
  p.environment = environment_with(rank.environment);
  for (auto& arg : p.argv) p.argv_pointers.push_back(arg.data());
  p.argv_pointers.push_back(nullptr);
  for (auto& var : p.environment) p.environment_pointers.push_back(var.data());
  p.environment_pointers.push_back(nullptr);
  return p;
}

struct Child {
  int rank = 0;
  pid_t pid = -1;
  int out = -1, err = -1;  // read ends; -1 once at end of stream
  LinePrefixer out_lines, err_lines;
  std::string start_error;  // why exec failed, if it did
  std::optional<Ending> ending;

  explicit Child(int r)
      : rank(r), out_lines("[rank " + std::to_string(r) + "] "), err_lines("[rank " + std::to_string(r) + "] ") {}
};

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed terminal or pipe: the ranks still need supervising
    done += static_cast<std::size_t>(n);
  }
}

// In the child, after fork: its own process group, a parent-death signal, the pipes as stdout/stderr,
// default signal handling, then exec. On failure, errno goes back through `status_fd`.
[[noreturn]] void exec_child(const Prepared& p, pid_t parent, int null_fd, int out_fd, int err_fd, int status_fd) {
  ::setpgid(0, 0);  // the launcher signals the group: the rank and whatever it started
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(128 + SIGTERM);  // the launcher died before prctl took effect
  ::dup2(null_fd, STDIN_FILENO);  // ranks do not share the terminal's input, and cannot stop on it
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(err_fd, STDERR_FILENO);
  // Ignored signals stay ignored across exec; a launcher started with SIGINT ignored (a background job
  // of a script) must still be able to stop its ranks.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (int signal : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE}) ::sigaction(signal, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(p.program.c_str(), p.argv_pointers.data(), p.environment_pointers.data());
  int error = errno;
  [[maybe_unused]] auto ignored = ::write(status_fd, &error, sizeof(error));
  ::_exit(127);
}

class Supervisor {
 public:
  Supervisor(const SupervisorOptions& options, std::size_t count) : options_(options) { children_.reserve(count); }
  ~Supervisor();

  void start(const RankCommand& rank, const Prepared& prepared);
  int run();

 private:
  void relay(int& fd, LinePrefixer& lines, int to, bool drain);
  void check_exits();
  void on_launcher_signal(int signal);
  void signal_running(int signal);
  void begin_stop(int signal);
  void message(const std::string& text) { write_all(options_.err_fd, "dew launch: " + text + "\n"); }
  std::size_t running() const;

  SupervisorOptions options_;
  SignalRelay signals_;
  std::vector<Child> children_;
  std::optional<Ending> first_failure_;
  int launcher_signal_ = 0;
  std::optional<Clock::time_point> kill_at_;  // set once the ranks were asked to stop
  bool killed_ = false;
};

Supervisor::~Supervisor() {
  // Whatever path leads here (an exception included), no rank or process it started is left behind.
  // Leaders are reaped only now, so their group ids cannot have been reused by then.
  for (auto& child : children_) {
    if (child.pid <= 0) continue;
    ::kill(-child.pid, child.ending ? SIGTERM : SIGKILL);
    while (::waitpid(child.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    if (child.out >= 0) ::close(child.out);
    if (child.err >= 0) ::close(child.err);
  }
}

void Supervisor::start(const RankCommand& rank, const Prepared& prepared) {
  int out[2] = {-1, -1}, err[2] = {-1, -1}, status[2] = {-1, -1};
  int null_fd = -1;
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(status, O_CLOEXEC) != 0 ||
      (null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
    int error = errno;  // most likely too many open files: thousands of ranks
    for (int fd : {out[0], out[1], err[0], err[1], status[0], status[1]}) {
      if (fd >= 0) ::close(fd);
    }
    fail("cannot create the pipes of rank ", rank.rank, ": ", std::strerror(error));
  }
  // The relay's handler must not run in the child before exec (it would write to the launcher's wake-up
  // pipe): the signals wait, blocked, until the child has restored the default handling.
  sigset_t relayed, previous;
  sigemptyset(&relayed);
  for (int signal : {SIGINT, SIGTERM, SIGCHLD}) sigaddset(&relayed, signal);
  ::pthread_sigmask(SIG_BLOCK, &relayed, &previous);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) exec_child(prepared, parent, null_fd, out[1], err[1], status[1]);
  int fork_error = errno;
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  for (int fd : {out[1], err[1], status[1], null_fd}) ::close(fd);
  if (pid < 0) {
    for (int fd : {out[0], err[0], status[0]}) ::close(fd);
    fail("cannot start rank ", rank.rank, ": fork: ", std::strerror(fork_error));
  }
  ::setpgid(pid, pid);  // also here: the launcher may signal the group before the child ran setpgid
  Child& child = children_.emplace_back(rank.rank);
  child.pid = pid;
  child.out = out[0];
  child.err = err[0];
  ::fcntl(child.out, F_SETFL, O_NONBLOCK);
  ::fcntl(child.err, F_SETFL, O_NONBLOCK);
  // Blocks until exec succeeded (the pipe closes on exec) or failed (errno arrives).
  int exec_error = 0;
  ssize_t n;
  while ((n = ::read(status[0], &exec_error, sizeof(exec_error))) < 0 && errno == EINTR) {
  }
  ::close(status[0]);
  if (n == sizeof(exec_error)) {
    child.start_error = str("could not start '", printable(prepared.program), "': ", std::strerror(exec_error));
  }
}

void Supervisor::relay(int& fd, LinePrefixer& lines, int to, bool drain) {
  char buffer[65536];
  // Draining reads what is buffered, not a stream: a process the rank left behind could write forever,
  // so the reads stop after more than a pipe holds (1 MiB at most on Linux).
  for (int reads = 0; fd >= 0 && reads < 32; ++reads) {
    ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // end of stream (or an error, which ends it too)
      write_all(to, lines.finish());
      ::close(fd);
      fd = -1;
      return;
    }
    write_all(to, lines.feed(std::string_view(buffer, static_cast<std::size_t>(n))));
    if (!drain) return;  // one read per wake-up keeps a chatty rank from starving the others
  }
}

std::size_t Supervisor::running() const {
  std::size_t n = 0;
  for (const auto& child : children_) n += child.ending ? 0 : 1;
  return n;
}

void Supervisor::signal_running(int signal) {
  for (const auto& child : children_) {
    if (!child.ending) ::kill(-child.pid, signal);
  }
}

void Supervisor::begin_stop(int signal) {
  if (kill_at_) return;
  signal_running(signal);
  kill_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(options_.grace_seconds));
}

std::string grace_text(double seconds) { return str("SIGKILL after ", seconds, " s"); }

void Supervisor::on_launcher_signal(int signal) {
  const char* name = signal == SIGINT ? "SIGINT" : "SIGTERM";
  if (kill_at_) {
    // Already stopping: a second Ctrl-C means now, as it does for dew train.
    if (!killed_) message(str("got ", name, " while stopping; killing the ", running(), " running rank(s)"));
    signal_running(SIGKILL);
    killed_ = true;
    return;
  }
  launcher_signal_ = signal;
  message(str("got ", name, "; passing it to the ", running(), " running rank(s) (", grace_text(options_.grace_seconds), ")"));
  begin_stop(signal);
}

void Supervisor::check_exits() {
  for (auto& child : children_) {
    if (child.ending) continue;
    siginfo_t info{};
    // WNOWAIT leaves the rank a zombie: its pid, and so its process group id, stays reserved until the
    // destructor reaps it, so signalling the group can never reach an unrelated process.
    if (::waitid(P_PID, static_cast<id_t>(child.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != child.pid) {
      continue;
    }
    Ending ending{info.si_code != CLD_EXITED, info.si_status};
    child.ending = ending;
    // What it wrote before exiting is in the pipes: out before the launcher's verdict on it.
    relay(child.out, child.out_lines, options_.out_fd, true);
    relay(child.err, child.err_lines, options_.err_fd, true);
    bool failed = ending.signaled || ending.code != 0;
    if (!failed || first_failure_ || kill_at_) continue;  // after a stop began, endings are its effect
    first_failure_ = ending;
    std::string how = child.start_error.empty() ? describe(ending) : child.start_error;
    std::string rest = running() == 0 ? std::string()
                                      : str("; stopping the other ", running(), " rank(s) (SIGTERM, ",
                                            grace_text(options_.grace_seconds), ")");
    message(str("rank ", child.rank, " ", how, rest));
    begin_stop(SIGTERM);
  }
}

int Supervisor::run() {
  while (running() > 0) {
    std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
    for (const auto& child : children_) {
      if (child.out >= 0) fds.push_back({child.out, POLLIN, 0});
      if (child.err >= 0) fds.push_back({child.err, POLLIN, 0});
    }
    // SIGCHLD wakes the loop; the cap is a backstop for a SIGCHLD some other thread of an embedding
    // program swallowed.
    int timeout_ms = 500;
    if (kill_at_ && !killed_) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*kill_at_ - Clock::now()).count();
      timeout_ms = static_cast<int>(std::max<long long>(0, std::min<long long>(timeout_ms, left)));
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) fail("poll: ", std::strerror(errno));
    for (int signal : signals_.take()) {
      if (signal == SIGINT || signal == SIGTERM) on_launcher_signal(signal);
    }
    for (auto& child : children_) {
      for (const auto& entry : fds) {
        if (entry.revents == 0) continue;
        if (entry.fd == child.out) relay(child.out, child.out_lines, options_.out_fd, false);
        if (entry.fd == child.err) relay(child.err, child.err_lines, options_.err_fd, false);
      }
    }
    check_exits();
    if (kill_at_ && !killed_ && Clock::now() >= *kill_at_ && running() > 0) {
      for (const auto& child : children_) {
        if (!child.ending) message(str("rank ", child.rank, " still running ", options_.grace_seconds, " s after the stop signal; sending SIGKILL"));
      }
      signal_running(SIGKILL);
      killed_ = true;
    }
  }
  // Every rank has exited; what is left in the pipes was written by processes they started.
  for (auto& child : children_) {
    relay(child.out, child.out_lines, options_.out_fd, true);
    relay(child.err, child.err_lines, options_.err_fd, true);
    write_all(options_.out_fd, child.out_lines.finish());
    write_all(options_.err_fd, child.err_lines.finish());
  }
  if (first_failure_) return shell_status(*first_failure_);
  if (launcher_signal_) return 128 + launcher_signal_;
  return 0;
}

}  // namespace

std::string describe(const Ending& ending) {
  if (!ending.signaled) return str("exited with status ", ending.code);
  const char* name = ::strsignal(ending.code);
  return str("killed by signal ", ending.code, " (", name ? name : "unknown", ")");
}

int shell_status(const Ending& ending) { return ending.signaled ? 128 + ending.code : ending.code; }

int run_ranks(const std::vector<RankCommand>& ranks, const SupervisorOptions& options) {
  if (ranks.empty()) fail("internal: no rank to start");
  std::vector<Prepared> prepared;
  for (const auto& rank : ranks) prepared.push_back(prepare(rank));  // every check before the first start
  Supervisor supervisor(options, ranks.size());
  for (std::size_t i = 0; i < ranks.size(); ++i) supervisor.start(ranks[i], prepared[i]);
  return supervisor.run();
}

}  // namespace dew::launch
