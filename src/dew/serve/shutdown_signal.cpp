#include "dew/serve/shutdown_signal.h"

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <thread>

#include "dew/core/error.h"

namespace dew::serve {

std::shared_ptr<ShutdownSignal> ShutdownSignal::watch() {
  auto watcher = std::shared_ptr<ShutdownSignal>(new ShutdownSignal());
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  // The default disposition first: an ignored signal (a server started in the background by a
  // non-interactive shell inherits SIGINT ignored) may be discarded before sigwait can take it.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(SIGINT, &default_action, nullptr);
  sigaction(SIGTERM, &default_action, nullptr);
  if (int error = pthread_sigmask(SIG_BLOCK, &signals, nullptr); error != 0) {
    fail("cannot block SIGINT/SIGTERM for the shutdown watcher (error ", error, ")");
  }
  // Detached and holding its own reference: it lives as long as the process, blocked in sigwait.
  std::thread([watcher, signals] {
    for (int count = 0;; ++count) {
      int signal = 0;
      if (sigwait(&signals, &signal) != 0) return;
      if (count > 0) {
        static const char kMessage[] = "\ndew serve: second signal, exiting now\n";
        [[maybe_unused]] auto ignored = ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
        ::_exit(128 + signal);
      }
      watcher->deliver(signal);
    }
  }).detach();
  return watcher;
}

int ShutdownSignal::wait() {
  std::unique_lock lock(mutex_);
  arrived_.wait(lock, [&] { return signal_ != 0 || ended_; });
  return signal_;
}

void ShutdownSignal::end() {
  {
    std::lock_guard lock(mutex_);
    ended_ = true;
  }
  arrived_.notify_all();
}

void ShutdownSignal::deliver(int signal) {
  {
    std::lock_guard lock(mutex_);
    signal_ = signal;
  }
  arrived_.notify_all();
}

}  // namespace dew::serve
