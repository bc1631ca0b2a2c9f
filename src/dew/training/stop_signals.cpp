#include "dew/training/stop_signals.h"

#include <atomic>

#include "dew/core/error.h"

namespace dew::training {
namespace {

volatile std::sig_atomic_t g_signal = 0;
struct sigaction g_previous_int, g_previous_term;
std::atomic<int> g_installed{0};

extern "C" void on_stop_signal(int signal) {
  if (g_signal != 0) {  // second signal: give up on the graceful stop
    sigaction(SIGINT, &g_previous_int, nullptr);
    sigaction(SIGTERM, &g_previous_term, nullptr);
    std::raise(signal);
    return;
  }
  g_signal = signal;
}

}  // namespace

StopSignals::StopSignals() {
  if (g_installed.fetch_add(1) != 0) {
    g_installed.fetch_sub(1);
    fail("a training run is already handling SIGINT/SIGTERM in this process");
  }
  g_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, &g_previous_int);
  sigaction(SIGTERM, &action, &g_previous_term);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
  g_signal = 0;
  g_installed.fetch_sub(1);
}

bool StopSignals::requested() const { return g_signal != 0; }
int StopSignals::signal() const { return g_signal; }

}  // namespace dew::training
