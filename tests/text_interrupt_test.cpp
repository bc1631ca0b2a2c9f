// Ctrl-C in a command (core/interrupt.h): the temporaries being written are
// removed, the old output stays, and the process ends with 128 + the signal, also when it inherited SIGINT
// ignored (a background job of a script). Each case runs in a forked child, so the signal is real.
#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"
#include "dew/core/interrupt.h"
#include "test_support.h"

namespace fs = std::filesystem;
using dew::test::TempDir;

namespace {

// Names in `dir` other than the given ones.
std::vector<std::string> other_entries(const fs::path& dir, std::initializer_list<std::string> expected) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    auto name = entry.path().filename().string();
    if (std::find(expected.begin(), expected.end(), name) == expected.end()) out.push_back(name);
  }
  return out;
}

// Forks a child that starts writing a directory and a file over older versions, says it is ready, and
// waits; sends it `signal`; returns its wait status.
int interrupt_a_writer(const fs::path& dir, int signal, bool inherited_ignored) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  pid_t child = ::fork();
  if (child == 0) {
    ::close(ready[0]);
    if (inherited_ignored) std::signal(SIGINT, SIG_IGN);
    dew::exit_on_interrupt();
    dew::AtomicDirectory tokens(dir / "tokens");
    dew::write_file_atomic(tokens.path() / "meta.json", "{\"new\": true}\n");
    dew::AtomicFile file(dir / "model.gguf");
    file.write("new, half written");
    [[maybe_unused]] auto written = ::write(ready[1], "r", 1);
    for (int i = 0; i < 1000; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ::_exit(0);  // not interrupted within 10 s: the test fails on the status
  }
  ::close(ready[1]);
  char byte = 0;
  [[maybe_unused]] auto got = ::read(ready[0], &byte, 1);
  ::close(ready[0]);
  ::kill(child, signal);
  int status = 0;
  ::waitpid(child, &status, 0);
  return status;
}

}  // namespace

TEST(InterruptCleanup, CtrlCRemovesPartialOutputAndKeepsTheOld) {
  for (bool inherited_ignored : {false, true}) {
    TempDir dir;
    fs::create_directory(dir / "tokens");
    dew::test::write_text(dir / "tokens" / "meta.json", "{\"old\": true}\n");
    dew::test::write_text(dir / "model.gguf", "old");
    int status = interrupt_a_writer(dir.path(), SIGINT, inherited_ignored);
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    EXPECT_EQ(WEXITSTATUS(status), 130);
    EXPECT_EQ(other_entries(dir.path(), {"tokens", "model.gguf"}), std::vector<std::string>{})
        << "inherited_ignored " << inherited_ignored;  // before: .tokens.partial-*, .model.gguf.tmp-*
    EXPECT_EQ(dew::test::read_text(dir / "tokens" / "meta.json"), "{\"old\": true}\n");
    EXPECT_EQ(dew::test::read_text(dir / "model.gguf"), "old");
  }
}

TEST(InterruptCleanup, SigtermEndsWith143) {
  TempDir dir;
  int status = interrupt_a_writer(dir.path(), SIGTERM, false);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 143);
  EXPECT_EQ(other_entries(dir.path(), {}), std::vector<std::string>{});
}

// The watcher design itself (core/interrupt.h), each case in a forked child: it has one thread until the
// watcher starts, so where a signal sent to the process lands depends on the design alone.
namespace {

// Runs `body` in a forked child and returns its wait status; the child exits with `body`'s result.
int in_child(const std::function<int()>& body) {
  pid_t child = ::fork();
  if (child == 0) {
    int code = 99;  // an exception
    try {
      code = body();
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return status;
}

// Waits up to 10 s for `condition`.
bool eventually(const std::function<bool()>& condition) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Whether the main thread (the process's first) sleeps, as in a blocking call; from /proc's stat, whose
// third field, after the parenthesized name, is the state.
bool main_thread_asleep() {
  std::ifstream stat("/proc/self/task/" + std::to_string(::getpid()) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto name_end = line.rfind(')');
  return name_end != std::string::npos && name_end + 2 < line.size() && line[name_end + 2] == 'S';
}

// Whether the calling thread blocks both signals.
bool blocks_interrupts() {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, SIGINT) && sigismember(&mask, SIGTERM);
}

}  // namespace

// A computing thread sitting in a blocking call is never interrupted by the signal: the watcher takes it.
// poll() is a call that a signal handler run on its thread ends with EINTR, whatever SA_RESTART says
// (the asynchronous fallback's handler, installed instead of the watcher here, ran on the main thread and
// poll returned EINTR in every try). Threads started after the watcher inherit the blocked signals.
TEST(InterruptWatcher, TakesTheSignalOffTheComputingThreads) {
  int status = in_child([] {
    dew::GracefulStop stop("second signal");
    bool helper_blocks = false;
    int wake[2];
    if (::pipe(wake) != 0) return 10;
    std::thread helper([&] {
      helper_blocks = blocks_interrupts();
      eventually(main_thread_asleep);  // in poll below, where a handler would interrupt it
      ::kill(::getpid(), SIGTERM);  // to the process, as a scheduler or `kill` sends it
      eventually([&] { return stop.requested(); });
      [[maybe_unused]] auto written = ::write(wake[1], "w", 1);
    });
    pollfd fd{wake[0], POLLIN, 0};
    const int ready = ::poll(&fd, 1, 10000);  // the computing thread, busy in a blocking call
    const int poll_errno = errno;
    helper.join();
    if (ready < 0 && poll_errno == EINTR) return 2;  // a handler ran on this thread
    if (ready != 1) return 3;                         // woken by neither: the signal was never recorded
    if (stop.signal() != SIGTERM) return 4;
    if (!helper_blocks || !blocks_interrupts()) return 5;
    return 0;
  });
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: poll interrupted, 3: no wake-up, 4: wrong signal, 5: a thread without the mask";
}

// A server's shutdown: the first signal wakes wait() with its number and the process goes on; the second
// ends it at once with 128 + the signal, removing the temporaries being written; end() wakes wait() with 0.
TEST(InterruptWatcher, FirstSignalWakesTheWaiterAndTheSecondEndsAtOnce) {
  TempDir dir;
  int status = in_child([&] {
    {
      dew::GracefulStop stopped_by_itself("unused");
      std::thread ender([&] { stopped_by_itself.end(); });
      const int woken_by = stopped_by_itself.wait();
      ender.join();
      if (woken_by != 0) return 2;
    }
    dew::GracefulStop stop("dew serve: second signal, exiting now");
    dew::AtomicFile file(dir / "out.bin");
    file.write("half written");
    std::thread sender([] { ::kill(::getpid(), SIGTERM); });
    const int first = stop.wait();
    sender.join();
    if (first != SIGTERM) return 3;
    ::kill(::getpid(), SIGINT);
    for (int i = 0; i < 1000; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return 4;  // not ended within 10 s
  });
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGINT) << "2: end() did not wake wait(), 3: wrong first signal, 4: the second was ignored";
  EXPECT_EQ(other_entries(dir.path(), {}), std::vector<std::string>{});  // the temporary is gone
}

// One graceful stop at a time; and a GracefulStop that started the watcher gives the signals back as they
// were (SIGINT ignored here, as in a background job of a script) when it ends, as does fork().
TEST(InterruptWatcher, AGracefulStopOfItsOwnLeavesTheSignalsAsItFoundThem) {
  int status = in_child([] {
    std::signal(SIGINT, SIG_IGN);
    {
      dew::GracefulStop stop("second signal");
      if (!blocks_interrupts()) return 2;
      bool refused = false;
      try {
        dew::GracefulStop another("second signal");
      } catch (const dew::Error&) {
        refused = true;
      }
      if (!refused) return 3;
      int child_status = in_child([] { return blocks_interrupts() ? 1 : 0; });
      if (!WIFEXITED(child_status) || WEXITSTATUS(child_status) != 0) return 4;
    }
    struct sigaction now {};
    sigaction(SIGINT, nullptr, &now);
    if (now.sa_handler != SIG_IGN) return 5;
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    if (sigismember(&mask, SIGINT) || sigismember(&mask, SIGTERM)) return 6;
    return 0;
  });
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: not blocked, 3: two at once, 4: a forked child kept the mask, "
                                       "5: disposition not restored, 6: mask not restored";
}
