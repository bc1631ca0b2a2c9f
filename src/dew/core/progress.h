#pragma once
// Progress for long work: a redrawn bar when the stream is a terminal, plain periodic lines when it is not
// (logs and CI capture those without control characters). Safe to advance from several threads. Log lines
// printed through line() appear above the bar. The one progress display of every command: tokenizing,
// training (steps, with the loss as its status), and any other long job.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace dew {

struct ProgressOptions {
  std::FILE* out = stdout;  // nullptr: silent
  // Periodic plain lines when `out` is not a terminal; off for work that logs lines of its own (training).
  bool lines_when_not_terminal = true;
  std::uint64_t start = 0;  // the count already done before this process (a resumed run's step): shown, not timed
};

class Progress {
 public:
  // total = 0 means unknown (no percentage or ETA). `unit` labels the count, e.g. "B" or "tokens".
  Progress(std::string label, std::uint64_t total, std::string unit = "", ProgressOptions options = {});
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void advance(std::uint64_t n);
  // Moves to an absolute count with a short status shown after it ("loss 4.213").
  void set(std::uint64_t done, std::string status = "");
  // Prints a log line (clearing the bar first on a terminal; the bar returns with the next update).
  void line(const std::string& text);
  void finish();  // prints the final line once; also called by the destructor

  static bool stdout_is_terminal();

 private:
  void maybe_draw();
  void draw(bool final);
  std::string label_;
  std::uint64_t total_;
  std::string unit_;
  ProgressOptions options_;
  bool terminal_;
  std::atomic<std::uint64_t> done_{0};
  std::mutex draw_mutex_;
  std::string status_;  // guarded by draw_mutex_
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::uint64_t last_reported_ = 0;
  bool bar_shown_ = false;
  bool finished_ = false;
};

std::string human_count(double value, const std::string& unit);  // 12.3 MB, 4.5 k tokens
std::string human_duration(double seconds);                       // 1m05s

}  // namespace dew
