#pragma once
// Preemption: while a StopSignals object lives, SIGINT and SIGTERM set a flag instead of killing the
// process, so the trainer can finish the current step, write a checkpoint and return. The previous
// handlers are restored when it goes away. A second signal while a stop is pending ends the process at
// once with status 128 + the signal (130 for Ctrl-C), whatever the inherited handling (even SIGINT
// ignored), so pressing Ctrl-C twice still ends a stuck process.
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
};

}  // namespace dew::training
