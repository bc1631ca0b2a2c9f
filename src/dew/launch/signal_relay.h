#pragma once
// The launcher's signals as bytes on a pipe (the self-pipe trick): the supervision loop sleeps in
// poll() on the ranks' output and this pipe together, so a rank's exit (SIGCHLD) or a Ctrl-C wakes it
// at once, with no race between checking and sleeping. The handler only writes one byte, which is
// async-signal-safe; everything else happens in the loop.
#include <vector>

namespace dew::launch {

class SignalRelay {
 public:
  // Catches SIGINT, SIGTERM and SIGCHLD until destroyed; the previous handlers and mask come back then.
  SignalRelay();
  ~SignalRelay();
  SignalRelay(const SignalRelay&) = delete;
  SignalRelay& operator=(const SignalRelay&) = delete;

  // Readable when a signal arrived; poll it.
  int fd() const { return read_fd_; }

  // The signals that arrived since the last call, in order (SIGCHLD included).
  std::vector<int> take();

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
};

}  // namespace dew::launch
