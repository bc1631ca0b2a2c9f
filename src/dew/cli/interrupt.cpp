#include "dew/cli/interrupt.h"

#include <unistd.h>

#include <csignal>

namespace dew::cli {
namespace {

// Only async-signal-safe calls: write(2) and _exit(2).
extern "C" void exit_now(int signal) {
  static const char kMessage[] = "\ndew: interrupted\n";
  [[maybe_unused]] auto ignored = ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  ::_exit(128 + signal);
}

}  // namespace

void exit_on_interrupt() {
  struct sigaction action {};
  action.sa_handler = exit_now;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

}  // namespace dew::cli
