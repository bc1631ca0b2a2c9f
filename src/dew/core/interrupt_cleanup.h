#pragma once
// Ctrl-C for commands that write files (tokenize, tokenizer train, export): SIGINT or SIGTERM removes the
// temporaries being written (remove_temporaries_in_flight_and_exit in atomic_file.h) and ends the process
// at once with the shell's status for the signal (130, 143). The destination keeps its old content.
//
// A handler could not do that work safely (removing files is not async-signal-safe), so the signals are
// blocked in the calling thread, and so in every thread it starts afterwards, and one watcher thread takes
// them with sigwait. Call it first thing in the command, before threads exist (LibTorch's and the
// tokenizer's pools inherit the mask). The signals are handled whatever the inherited disposition: a
// command started in the background by a non-interactive shell inherits SIGINT ignored.
// Training does not use this: its first signal finishes the step and writes a checkpoint (StopSignals).

namespace dew {

void remove_temporaries_on_interrupt();

}  // namespace dew
