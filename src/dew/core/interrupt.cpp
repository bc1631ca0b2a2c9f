#include "dew/core/interrupt.h"

#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"

namespace dew {

namespace {

sigset_t interrupt_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  return signals;
}

void say_on_its_own_line(const char* message) {
  // write(2) rather than stdio: another thread may hold a stdio lock indefinitely (chat blocked reading stdin).
  [[maybe_unused]] auto a = ::write(STDERR_FILENO, "\n", 1);
  [[maybe_unused]] auto b = ::write(STDERR_FILENO, message, std::strlen(message));
  [[maybe_unused]] auto c = ::write(STDERR_FILENO, "\n", 1);
}

}  // namespace

// The watcher thread and the state it shares with GracefulStop. A command's watcher (exit_on_interrupt)
// lives as long as the process. One that a GracefulStop started (a program embedding the Trainer) is
// stopped with it, and the signals' dispositions and the calling thread's mask come back as they were.
class InterruptWatcher {
 public:
  static constexpr char kThreadName[] = "dew-interrupts";  // in top, gdb and /proc/PID/task/*/comm

  // Starts the watcher unless it runs. Returns whether this call started one that ends with its caller
  // (stop_scoped); a command's call keeps the watcher, whoever started it, for the process's life.
  static bool start(bool for_the_process) {
    std::lock_guard lock(lifecycle_mutex());
    static const bool fork_handlers = ::pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child) == 0;
    (void)fork_handlers;
    if (running) {
      if (for_the_process) for_the_process_ = true;
      return false;
    }
    const sigset_t signals = interrupt_signals();
    // The default disposition first: a signal that is ignored may be discarded before sigwait can take it.
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    sigaction(SIGINT, &default_action, &previous_int);
    sigaction(SIGTERM, &default_action, &previous_term);
    if (int error = pthread_sigmask(SIG_BLOCK, &signals, &mask_before); error != 0) {
      restore_dispositions();
      fail("cannot block SIGINT/SIGTERM for the interrupt watcher (error ", error, ")");
    }
    // Created with the signals blocked, as sigwait needs.
    if (int error = pthread_create(&thread, nullptr, watch, nullptr); error != 0) {
      restore_mask_and_dispositions();
      fail("cannot start the interrupt watcher thread (error ", error, ")");
    }
    running = true;
    for_the_process_ = for_the_process;
    return !for_the_process;
  }

  static void stop_scoped() {
    std::lock_guard lock(lifecycle_mutex());
    if (!running || for_the_process_) return;
    // To the watcher's thread only, marked so that it is not taken for a real SIGTERM. (Not pthread_kill:
    // its si_code does not tell it from kill(2) on every kernel.)
    union sigval word {};
    word.sival_ptr = &stop_word;
    ::pthread_sigqueue(thread, SIGTERM, word);
    ::pthread_join(thread, nullptr);
    running = false;
    restore_mask_and_dispositions();
  }

  static void arm(GracefulStop* stop) {
    std::lock_guard lock(armed_mutex());
    if (armed != nullptr) fail("a training run or a server already handles SIGINT/SIGTERM in this process: one at a time");
    armed = stop;
  }

  static void disarm(GracefulStop* stop) {
    std::lock_guard lock(armed_mutex());
    if (armed == stop) armed = nullptr;
  }

  static int armed_signal() {
    std::lock_guard lock(armed_mutex());
    return armed ? armed->signal() : 0;
  }

 private:
  static void* watch(void*) {
    ::pthread_setname_np(::pthread_self(), kThreadName);
    const sigset_t signals = interrupt_signals();
    for (;;) {
      siginfo_t info{};
      const int signal = sigwaitinfo(&signals, &info);
      if (signal < 0) {
        if (errno == EINTR) continue;
        return nullptr;
      }
      if (info.si_code == SI_QUEUE && info.si_pid == ::getpid() && info.si_value.sival_ptr == &stop_word) return nullptr;
      take(signal);
    }
  }

  static void take(int signal) {
    // Held to the end when the process ends: a GracefulStop cannot be disarmed halfway through.
    std::unique_lock lock(armed_mutex());
    if (armed != nullptr) {
      if (armed->record(signal)) return;  // the first: its owner stops in its own time
      say_on_its_own_line(armed->on_second_signal_);
    } else {
      say_on_its_own_line("dew: interrupted");
    }
    remove_temporaries_in_flight_and_exit(128 + signal);
  }

  static void restore_dispositions() {
    sigaction(SIGINT, &previous_int, nullptr);
    sigaction(SIGTERM, &previous_term, nullptr);
  }

  static void restore_mask_and_dispositions() {
    restore_dispositions();
    sigset_t unblock;
    sigemptyset(&unblock);
    for (int signal : {SIGINT, SIGTERM}) {
      if (!sigismember(&mask_before, signal)) sigaddset(&unblock, signal);
    }
    pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
  }

  // fork() copies only the calling thread: the child has no watcher, so it gets the signals back as they
  // were before the watcher started, and may start its own. The locks are held across fork so that the
  // child's copies are not ones another thread held.
  static void before_fork() {
    lifecycle_mutex().lock();
    armed_mutex().lock();
  }
  static void after_fork_in_parent() {
    armed_mutex().unlock();
    lifecycle_mutex().unlock();
  }
  static void after_fork_in_child() {
    armed_mutex().unlock();
    lifecycle_mutex().unlock();
    if (!running) return;
    running = false;
    restore_mask_and_dispositions();
  }

  static std::mutex& lifecycle_mutex() {
    static std::mutex value;
    return value;
  }
  static std::mutex& armed_mutex() {
    static std::mutex value;
    return value;
  }

  // Under lifecycle_mutex.
  static inline bool running = false;
  static inline bool for_the_process_ = false;
  static inline pthread_t thread{};
  static inline struct sigaction previous_int {}, previous_term {};
  static inline sigset_t mask_before{};
  // Its address is stop_scoped's word to the watcher.
  static inline char stop_word = 0;
  // Under armed_mutex.
  static inline GracefulStop* armed = nullptr;
};

void exit_on_interrupt() { InterruptWatcher::start(/*for_the_process=*/true); }

GracefulStop::GracefulStop(const char* on_second_signal)
    : on_second_signal_(on_second_signal), owns_watcher_(InterruptWatcher::start(/*for_the_process=*/false)) {
  try {
    InterruptWatcher::arm(this);
  } catch (...) {
    if (owns_watcher_) InterruptWatcher::stop_scoped();
    throw;
  }
}

GracefulStop::~GracefulStop() {
  InterruptWatcher::disarm(this);
  if (owns_watcher_) InterruptWatcher::stop_scoped();
}

int GracefulStop::signal() const {
  std::lock_guard lock(mutex_);
  return signal_;
}

int GracefulStop::wait() {
  std::unique_lock lock(mutex_);
  woken_.wait(lock, [&] { return signal_ != 0 || ended_; });
  return signal_;
}

void GracefulStop::end() {
  {
    std::lock_guard lock(mutex_);
    ended_ = true;
  }
  woken_.notify_all();
}

bool GracefulStop::record(int signal) {
  {
    std::lock_guard lock(mutex_);
    if (signal_ != 0) return false;
    signal_ = signal;
  }
  woken_.notify_all();
  return true;
}

int graceful_stop_signal() { return InterruptWatcher::armed_signal(); }

}  // namespace dew
