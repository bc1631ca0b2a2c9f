#pragma once
// What GET /metrics reports, in Prometheus' text format: requests answered by endpoint and status, prompt
// and generated tokens, the queue depth and batch size now, time to first token (a histogram) and the
// generated tokens per second over the last seconds. Handler threads and the serving loop record into it
// at once, so every member is behind one mutex; nothing here is on a per-token hot path but
// record_step, once per engine step.
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace dew::serve {

class ServerMetrics {
 public:
  using Clock = std::chrono::steady_clock;
  ServerMetrics();

  void record_request(const std::string& endpoint, int status);
  void record_first_token(double seconds);
  // After each turn of the serving loop: the queue depth and batch size, the totals the engine counted,
  // and whether a step ran (an idle turn updates the gauges only).
  void record_step(std::int64_t waiting, std::int64_t running, std::int64_t prompt_tokens_total,
                   std::int64_t generated_tokens_total, bool stepped = true, Clock::time_point now = Clock::now());
  // Prompt tokens the engine's prefix cache supplied so far (of prompt_tokens_total).
  void set_cached_prompt_tokens(std::int64_t cached_prompt_tokens_total);
  // Requests accepted by the HTTP layer but not finished (waiting + running choices).
  void set_outstanding(std::int64_t outstanding);

  std::string prometheus_text() const;
  // Generated tokens per second over the last window (0 when idle).
  double tokens_per_second(Clock::time_point now = Clock::now()) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::int64_t> requests_;
  std::vector<double> ttft_bounds_;
  std::vector<std::int64_t> ttft_counts_;  // per bucket (not cumulative); one more for +Inf
  double ttft_sum_ = 0;
  std::int64_t ttft_count_ = 0;
  std::int64_t waiting_ = 0, running_ = 0, outstanding_ = 0, steps_ = 0;
  std::int64_t prompt_tokens_ = 0, generated_tokens_ = 0, cached_prompt_tokens_ = 0;
  std::deque<std::pair<Clock::time_point, std::int64_t>> rate_samples_;  // (time, generated total)
};

}  // namespace dew::serve
