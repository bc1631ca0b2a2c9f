#pragma once
// Ctrl-C: SIGINT or SIGTERM removes the temporaries this process is writing (remove_temporaries_in_flight_and_exit
// in atomic_file.h; none for generate, eval or chat) and ends the process at once with the shell's status for
// the signal (130, 143), even inside a long prefill or a blocking read. A destination keeps its old content.
//
// A handler could not remove files safely (that is not async-signal-safe), so the signals are blocked in
// the calling thread, and so in every thread it starts afterwards, and one watcher thread takes them with
// sigwait. Call it first thing in the command, before threads exist (LibTorch's and the tokenizer's pools
// inherit the mask). The signals are handled whatever the inherited disposition: a command started in the
// background by a non-interactive shell inherits SIGINT ignored, and would otherwise run on.
//
// Training arms a graceful stop (training/stop_signals.h) once its loop starts: while armed, the first signal
// is only recorded, for the trainer to finish its step, write a checkpoint and return; the second ends the
// process as above. Taking the signals on the watcher also keeps them off the computing threads: a handler
// run on a thread inside a oneDNN JIT kernel corrupted that kernel's result now and then (a non-finite
// gradient norm in about one run in six under load).

namespace dew {

void exit_on_interrupt();

// Whether exit_on_interrupt's watcher takes this process's SIGINT and SIGTERM.
bool interrupt_watcher_running();
// While armed, the watcher records the first signal (graceful_stop_signal) instead of ending the process.
// Arming clears a signal recorded before.
void arm_graceful_stop();
void disarm_graceful_stop();
// The signal recorded while armed, 0 if none.
int graceful_stop_signal();

}  // namespace dew
