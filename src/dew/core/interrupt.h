#pragma once
// SIGINT and SIGTERM, the one design for every command: the signals are blocked in every thread and one
// watcher thread takes them with sigwait, so no signal handler ever runs, least of all on a computing
// thread (a handler run on a thread inside a oneDNN JIT kernel corrupted that kernel's result now and then:
// a non-finite gradient norm in about one run in six under load). A handler also could not remove files
// safely (that is not async-signal-safe); the watcher can.
//
// What a signal does depends on whether a graceful stop is armed:
// - none (plain commands, and training before its loop starts): the temporaries this process is writing are
//   removed (remove_temporaries_in_flight_and_exit, atomic_file.h) and the process ends at once with the
//   shell's status for the signal (130, 143), even inside a long prefill or a blocking read. A destination
//   keeps its old content.
// - a GracefulStop (training's loop, a server): the first signal is only recorded, for its owner to finish
//   (a step and a checkpoint; the running requests), and the second ends the process as above, so a stuck
//   stop still yields to a second Ctrl-C.
#include <condition_variable>
#include <mutex>

namespace dew {

// Starts the watcher (once; later calls do nothing). Call it first thing in a command, before threads
// exist: it blocks the signals in the calling thread, and every thread started afterwards (LibTorch's and
// the tokenizer's pools, a server's) inherits the mask. A thread started before keeps the signals
// unblocked, and the kernel may pick it for a signal sent to the process: with no handler, the default
// action then ends the process at once. The signals are taken whatever the inherited disposition: a
// command started in the background by a non-interactive shell inherits SIGINT ignored, and would otherwise
// run on. The watcher does not survive fork(): a forked child gets the signals unblocked again (as they were
// before the watcher started) and may start its own.
//
// Only signals sent to the process are taken (kill, Ctrl-C, a scheduler's SIGTERM). One sent to another
// thread of it (raise, pthread_kill) stays pending on that thread, where it is blocked.
void exit_on_interrupt();

// While one lives, the watcher records the first SIGINT or SIGTERM instead of ending the process; a second
// one prints `on_second_signal` on a line of its own and ends the process with 128 + the signal, removing
// the temporaries being written (a checkpoint being written is one; the previous checkpoint stays whole).
// One at a time.
//
// Where the command did not start the watcher (a program embedding the Trainer, a test), constructing one
// starts it as exit_on_interrupt does (see there on threads started before), and destroying it, on the
// same thread, stops it and gives back the signals' dispositions and that thread's mask as they were.
class GracefulStop {
 public:
  // `on_second_signal` is a string literal: the watcher writes it from its thread at any time.
  explicit GracefulStop(const char* on_second_signal);
  ~GracefulStop();  // signals end the process at once again (or, where it started the watcher, as before it)
  GracefulStop(const GracefulStop&) = delete;
  GracefulStop& operator=(const GracefulStop&) = delete;

  // The signal recorded since construction, 0 if none.
  int signal() const;
  bool requested() const { return signal() != 0; }

  // Blocks until a signal is recorded or end() is called; returns the signal, 0 for end().
  int wait();
  // Wakes wait() without a signal (a server that stopped by itself).
  void end();

 private:
  // The watcher's side: records the first signal and wakes wait(); false for a later one.
  bool record(int signal);

  const char* on_second_signal_;
  bool owns_watcher_;  // started the watcher, so stops it
  mutable std::mutex mutex_;
  std::condition_variable woken_;
  int signal_ = 0;
  bool ended_ = false;

  friend class InterruptWatcher;
};

// The signal recorded by the GracefulStop that lives now, 0 if none (or none lives). For code that does
// not own it (a test that waits for its signal to be taken).
int graceful_stop_signal();

}  // namespace dew
