#include "dew/launch/signal_relay.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "dew/core/error.h"

namespace dew::launch {

namespace {
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGCHLD};
int g_write_fd = -1;  // the handler's only state; one relay at a time
struct sigaction g_previous[3];
sigset_t g_previous_mask;

void on_signal(int signal) {
  int saved = errno;
  unsigned char byte = static_cast<unsigned char>(signal);
  // A full pipe means a wake-up is already pending; losing this byte loses nothing but a duplicate.
  [[maybe_unused]] auto ignored = ::write(g_write_fd, &byte, 1);
  errno = saved;
}
}  // namespace

SignalRelay::SignalRelay() {
  if (g_write_fd >= 0) fail("internal: two launch supervisors at once");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) fail("cannot create a pipe: ", std::strerror(errno));
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  g_write_fd = write_fd_;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_NOCLDSTOP;  // stopped or continued ranks are not endings
  for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &action, &g_previous[i]);
  // A caller may have blocked them (dew's interrupt watcher does); the loop needs them delivered.
  sigset_t mask;
  sigemptyset(&mask);
  for (int signal : kSignals) sigaddset(&mask, signal);
  ::pthread_sigmask(SIG_UNBLOCK, &mask, &g_previous_mask);
}

SignalRelay::~SignalRelay() {
  ::pthread_sigmask(SIG_SETMASK, &g_previous_mask, nullptr);
  for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &g_previous[i], nullptr);
  g_write_fd = -1;
  ::close(read_fd_);
  ::close(write_fd_);
}

std::vector<int> SignalRelay::take() {
  std::vector<int> signals;
  unsigned char bytes[64];
  ssize_t n;
  while ((n = ::read(read_fd_, bytes, sizeof(bytes))) > 0) signals.insert(signals.end(), bytes, bytes + n);
  return signals;
}

}  // namespace dew::launch
