#pragma once
// SIGINT and SIGTERM for a server, which must not die at once (core/interrupt.h's behaviour) but stop
// taking requests, let the running ones finish within a grace period, and exit 0.
//
// watch() blocks both signals in the calling thread, so every thread started afterwards inherits the mask
// (call it before loading the model: LibTorch's pools are threads too), and one watcher thread takes them
// with sigwait. The first signal wakes wait(); a second ends the process at once with 128 + the signal,
// so a stuck shutdown still yields to a second Ctrl-C.
#include <condition_variable>
#include <memory>
#include <mutex>

namespace dew::serve {

class ShutdownSignal {
 public:
  static std::shared_ptr<ShutdownSignal> watch();

  // Blocks until a signal arrives or end() is called; returns the signal's number, 0 for end().
  int wait();
  // Wakes wait() without a signal (the server stopped by itself).
  void end();

 private:
  void deliver(int signal);
  std::mutex mutex_;
  std::condition_variable arrived_;
  int signal_ = 0;
  bool ended_ = false;
};

}  // namespace dew::serve
