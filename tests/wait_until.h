#pragma once
// Waiting in tests for something another thread or process does: poll a condition until it holds or a
// deadline passes, instead of sleeping a fixed time and hoping. A fixed sleep is either too short on a
// loaded machine (the test flakes) or too long everywhere else; a poll returns as soon as the condition
// holds, so the deadline can be generous. It bounds a wait, it does not time anything: an assertion on
// how long something took belongs in a benchmark (bench/), not a test.
#include <chrono>
#include <thread>

namespace dew::test {

// Long enough that only a hang reaches it on a shared, loaded machine.
inline constexpr std::chrono::seconds kWaitDeadline{60};

// Polls `condition` every `poll` until it returns true (then true) or `deadline` has passed (then one last
// look at it).
template <class Condition>
bool wait_until(Condition&& condition, std::chrono::milliseconds deadline = kWaitDeadline,
                std::chrono::milliseconds poll = std::chrono::milliseconds(20)) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (condition()) return true;
    std::this_thread::sleep_for(poll);
  }
  return condition();
}

}  // namespace dew::test
