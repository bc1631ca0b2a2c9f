#include "dew/core/interrupt.h"

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <thread>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"

namespace dew {

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
  std::thread([signals] {
    int signal = 0;
    if (sigwait(&signals, &signal) != 0) return;
    static const char kMessage[] = "\ndew: interrupted\n";
    [[maybe_unused]] auto ignored = ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
    remove_temporaries_in_flight_and_exit(128 + signal);
  }).detach();
}

}  // namespace dew
