#include "dew/training/stop_signals.h"

#include <unistd.h>

#include <atomic>

#include "dew/core/error.h"
#include "dew/core/interrupt.h"

namespace dew::training {
namespace {

volatile std::sig_atomic_t g_signal = 0;
struct sigaction g_previous_int, g_previous_term;
std::atomic<int> g_installed{0};

// Only async-signal-safe calls: write(2) and _exit(2).
extern "C" void on_stop_signal(int signal) {
  if (g_signal != 0) {
    // Second signal: give up on the graceful stop. Not by restoring the previous handler and re-raising:
    // a run started in the background by a non-interactive shell inherits SIGINT ignored, and the
    // re-raised signal would be ignored too. _exit skips destructors, so the checkpoint being written,
    // if any, stays a temporary that the next writer cleans; the previous checkpoint is whole.
    static const char kMessage[] = "\ndew: second interrupt, quitting without a checkpoint\n";
    [[maybe_unused]] auto ignored = ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
    ::_exit(128 + signal);
  }
  g_signal = signal;
}

}  // namespace

StopSignals::StopSignals() : on_watcher_(interrupt_watcher_running()) {
  if (g_installed.fetch_add(1) != 0) {
    g_installed.fetch_sub(1);
    fail("a training run is already handling SIGINT/SIGTERM in this process");
  }
  g_signal = 0;
  if (on_watcher_) {
    arm_graceful_stop();
    return;
  }
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, &g_previous_int);
  sigaction(SIGTERM, &action, &g_previous_term);
}

StopSignals::~StopSignals() {
  if (on_watcher_) {
    disarm_graceful_stop();
  } else {
    sigaction(SIGINT, &g_previous_int, nullptr);
    sigaction(SIGTERM, &g_previous_term, nullptr);
  }
  g_signal = 0;
  g_installed.fetch_sub(1);
}

bool StopSignals::requested() const { return signal() != 0; }
int StopSignals::signal() const { return on_watcher_ ? graceful_stop_signal() : static_cast<int>(g_signal); }

}  // namespace dew::training
