#pragma once
// Progress for long work: a redrawn bar when stdout is a terminal, plain periodic lines when it is not
// (logs and CI capture those without control characters). Safe to advance from several threads.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace dew {

class Progress {
 public:
  // total = 0 means unknown (no percentage or ETA). `unit` labels the count, e.g. "B" or "tokens".
  Progress(std::string label, std::uint64_t total, std::string unit = "");
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void advance(std::uint64_t n);
  void finish();  // prints the final line once; also called by the destructor

  static bool stdout_is_terminal();

 private:
  void draw(bool final);
  std::string label_;
  std::uint64_t total_;
  std::string unit_;
  bool terminal_;
  std::atomic<std::uint64_t> done_{0};
  std::mutex draw_mutex_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::uint64_t last_reported_ = 0;
  bool finished_ = false;
};

std::string human_count(double value, const std::string& unit);  // 12.3 MB, 4.5 k tokens
std::string human_duration(double seconds);                       // 1m05s

}  // namespace dew
