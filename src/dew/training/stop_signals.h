#pragma once
// Preemption: while a StopSignals object lives, SIGINT and SIGTERM set a flag instead of killing the
// process, so the trainer can finish the current step, write a checkpoint and return. A second signal while
// a stop is pending ends the process at once with status 128 + the signal (130 for Ctrl-C), whatever the
// inherited handling (even SIGINT ignored), so pressing Ctrl-C twice still ends a stuck process.
//
// Where the command took the signals onto a watcher thread first thing (exit_on_interrupt, core/interrupt.h:
// `dew train` does), StopSignals arms that watcher's graceful stop and no signal ever runs on a computing
// thread. Otherwise (a program embedding the Trainer) it installs an asynchronous handler for its lifetime
// and restores the previous ones after.
#include <csignal>

namespace dew::training {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Whether a SIGINT or SIGTERM arrived since construction, and which.
  bool requested() const;
  int signal() const;

 private:
  bool on_watcher_;  // the signals go to exit_on_interrupt's watcher thread
};

}  // namespace dew::training
