#pragma once
// Ctrl-C for every command but training: SIGINT or SIGTERM removes the temporaries this process is
// writing (remove_temporaries_in_flight_and_exit in atomic_file.h; none for generate, eval or chat) and
// ends the process at once with the shell's status for the signal (130, 143), even inside a long prefill or
// a blocking read. A destination keeps its old content.
//
// A handler could not remove files safely (that is not async-signal-safe), so the signals are blocked in
// the calling thread, and so in every thread it starts afterwards, and one watcher thread takes them with
// sigwait. Call it first thing in the command, before threads exist (LibTorch's and the tokenizer's pools
// inherit the mask). The signals are handled whatever the inherited disposition: a command started in the
// background by a non-interactive shell inherits SIGINT ignored, and would otherwise run on.
// Training does not use this: its first signal finishes the step and writes a checkpoint (StopSignals).

namespace dew {

void exit_on_interrupt();

}  // namespace dew
