#include "dew/core/interrupt.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <thread>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"

namespace dew {

namespace {

std::atomic<bool> g_running{false};
std::atomic<bool> g_armed{false};
std::atomic<int> g_stop_signal{0};

void say(const char* message, std::size_t length) { [[maybe_unused]] auto ignored = ::write(STDERR_FILENO, message, length); }

}  // namespace

void exit_on_interrupt() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  // The default disposition first: a signal that is ignored may be discarded before sigwait can take it.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(SIGINT, &default_action, nullptr);
  sigaction(SIGTERM, &default_action, nullptr);
  if (int error = pthread_sigmask(SIG_BLOCK, &signals, nullptr); error != 0) {
    fail("cannot block SIGINT/SIGTERM for the interrupt watcher (error ", error, ")");
  }
  g_running = true;
  std::thread([signals] {
    for (;;) {
      int signal = 0;
      if (sigwait(&signals, &signal) != 0) return;
      if (g_armed.load()) {
        int none = 0;
        if (g_stop_signal.compare_exchange_strong(none, signal)) continue;  // the first: the trainer stops after its step
        static const char kQuit[] = "\ndew: second interrupt, quitting without a checkpoint\n";
        say(kQuit, sizeof(kQuit) - 1);
      } else {
        static const char kMessage[] = "\ndew: interrupted\n";
        say(kMessage, sizeof(kMessage) - 1);
      }
      remove_temporaries_in_flight_and_exit(128 + signal);
    }
  }).detach();
}

bool interrupt_watcher_running() { return g_running.load(); }

void arm_graceful_stop() {
  g_stop_signal = 0;
  g_armed = true;
}

void disarm_graceful_stop() {
  g_armed = false;
  g_stop_signal = 0;
}

int graceful_stop_signal() { return g_stop_signal.load(); }

}  // namespace dew
