// Ctrl-C in a command (core/interrupt.h): the temporaries being written are
// removed, the old output stays, and the process ends with 128 + the signal, also when it inherited SIGINT
// ignored (a background job of a script). Each case runs in a forked child, so the signal is real.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>

#include "dew/core/atomic_file.h"
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
