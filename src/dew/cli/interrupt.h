#pragma once
// Ctrl-C for commands that write nothing (generate, eval, chat): SIGINT and SIGTERM end the process at
// once with the shell's status for the signal (130, 143), even inside a long prefill or a blocking read.
//
// The handler is installed whatever the inherited disposition: a command started in the background by a
// non-interactive shell inherits SIGINT ignored, and would otherwise run on after an interrupt.
// It calls _exit, which skips destructors: commands that write files must not use it (an atomic
// file's temporary would be left behind); they keep the default disposition or poll a flag.

namespace dew::cli {

void exit_on_interrupt();

}  // namespace dew::cli
