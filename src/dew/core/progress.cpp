#include "dew/core/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "dew/core/error.h"

namespace dew {
namespace {
constexpr double kTerminalRedrawSeconds = 0.1;
constexpr double kLogLineSeconds = 10.0;
}  // namespace

std::string human_count(double value, const std::string& unit) {
  const char* prefixes[] = {"", "k", "M", "G", "T"};
  int i = 0;
  while (std::fabs(value) >= 1000.0 && i < 4) {
    value /= 1000.0;
    ++i;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, i == 0 ? "%.0f %s%s" : "%.1f %s%s", value, prefixes[i], unit.c_str());
  return buf;
}

std::string human_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lds", s);
  }
  return buf;
}

bool Progress::stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

Progress::Progress(std::string label, std::uint64_t total, std::string unit, ProgressOptions options)
    : label_(std::move(label)), total_(total), unit_(std::move(unit)), options_(options),
      terminal_(options.out && ::isatty(::fileno(options.out)) == 1), start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  done_.store(options.start, std::memory_order_relaxed);
  last_reported_ = options.start;
}

Progress::~Progress() { finish(); }

void Progress::advance(std::uint64_t n) {
  done_.fetch_add(n, std::memory_order_relaxed);
  maybe_draw();
}

void Progress::set(std::uint64_t done, std::string status) {
  done_.store(done, std::memory_order_relaxed);
  {
    std::lock_guard lock(draw_mutex_);
    status_ = std::move(status);
  }
  maybe_draw();
}

void Progress::maybe_draw() {
  if (!options_.out || (!terminal_ && !options_.lines_when_not_terminal)) return;
  auto now = std::chrono::steady_clock::now();
  double since = std::chrono::duration<double>(now - last_draw_).count();
  if (since < (terminal_ ? kTerminalRedrawSeconds : kLogLineSeconds)) return;
  std::unique_lock lock(draw_mutex_, std::try_to_lock);
  if (lock.owns_lock() && !finished_) draw(false);
}

void Progress::line(const std::string& text) {
  if (!options_.out) return;
  std::lock_guard lock(draw_mutex_);
  std::fprintf(options_.out, "%s%s\n", bar_shown_ ? "\r\033[K" : "", text.c_str());
  std::fflush(options_.out);
  bar_shown_ = false;
}

void Progress::finish() {
  std::lock_guard lock(draw_mutex_);
  if (finished_) return;
  finished_ = true;
  if (!options_.out) return;
  if (terminal_ || options_.lines_when_not_terminal) {
    draw(true);
  }
}

void Progress::draw(bool final) {
  auto now = std::chrono::steady_clock::now();
  last_draw_ = now;
  double elapsed = std::chrono::duration<double>(now - start_).count();
  std::uint64_t done = done_.load(std::memory_order_relaxed);
  if (!terminal_ && !final && done == last_reported_) return;
  last_reported_ = done;
  // Rate and ETA from this process's share: a resumed run's earlier steps took no time here.
  const double timed = static_cast<double>(done >= options_.start ? done - options_.start : 0);
  double rate = elapsed > 0 ? timed / elapsed : 0.0;
  auto count = [&](double value) { return unit_.empty() ? dew::str(static_cast<long long>(value)) : human_count(value, unit_); };
  std::string line = label_ + " ";
  if (total_ > 0) {
    double fraction = std::min(1.0, static_cast<double>(done) / static_cast<double>(total_));
    if (terminal_) {
      constexpr int width = 30;
      int filled = static_cast<int>(fraction * width);
      line += "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] ";
    }
    char pct[16];
    std::snprintf(pct, sizeof pct, "%5.1f%% ", 100.0 * fraction);
    line += pct + count(static_cast<double>(done)) + "/" + count(static_cast<double>(total_));
    if (!status_.empty()) line += " " + status_;
    if (!final && rate > 0) line += " eta " + human_duration((total_ - std::min(done, total_)) / rate);
  } else {
    line += count(static_cast<double>(done));
    if (!status_.empty()) line += " " + status_;
  }
  if (!unit_.empty()) line += " " + human_count(rate, unit_) + "/s";
  line += " " + human_duration(elapsed);
  if (terminal_) {
    std::fprintf(options_.out, "\r\033[K%s%s", line.c_str(), final ? "\n" : "");
    bar_shown_ = !final;
  } else {
    std::fprintf(options_.out, "%s\n", line.c_str());
  }
  std::fflush(options_.out);
}

}  // namespace dew
