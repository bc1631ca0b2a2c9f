#pragma once
// The one thread that owns the Engine. HTTP handler threads hand it jobs through a locked inbox; it
// submits them, steps the engine while anything is waiting or running, and the engine's callbacks (on this
// thread) decode tokens and push updates to each job's handler. Cancels (a client gone, a shutdown) go
// through the same lock, so the engine is only ever touched from this thread, as its contract requires.
//
// Admission is bounded: a job of k choices is refused (429) when the choices already accepted and not
// finished plus k would exceed `capacity` (= --max-batch + --max-queue), so a burst gets a quick answer
// instead of an ever longer wait.
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "dew/inference/engine.h"
#include "dew/serve/serve_job.h"
#include "dew/serve/server_metrics.h"

namespace dew::serve {

class ServingLoop {
 public:
  ServingLoop(inference::Engine& engine, ServerMetrics& metrics, std::int64_t capacity);
  ~ServingLoop();  // stop()
  ServingLoop(const ServingLoop&) = delete;
  ServingLoop& operator=(const ServingLoop&) = delete;

  enum class Admission { accepted, full, closed };
  // Queues the job for submission (the handler then waits on job->wait_accepted()).
  Admission submit(const std::shared_ptr<ServeJob>& job);
  // Ends the job's choices now; their final updates say "cancelled". Safe to call twice or after the end.
  void cancel(const std::shared_ptr<ServeJob>& job);
  // Shutdown, in order: refuse new jobs (close), let the accepted ones run (wait_idle), end the rest
  // (cancel_all), end the thread (stop).
  void close();
  bool wait_idle(std::chrono::milliseconds timeout);
  void cancel_all();
  void stop();

  std::int64_t outstanding() const { return outstanding_.load(); }
  std::int64_t capacity() const { return capacity_; }

 private:
  void run();
  void start_job(const std::shared_ptr<ServeJob>& job);
  bool on_event(ServeJob& job, std::size_t choice, const inference::EngineEvent& event);
  void release(std::int64_t choices);

  inference::Engine& engine_;
  ServerMetrics& metrics_;
  const std::int64_t capacity_;
  std::atomic<std::int64_t> outstanding_{0};

  std::mutex mutex_;
  std::condition_variable wake_;       // the loop: new work, a cancel, stop
  std::condition_variable idle_;       // wait_idle: outstanding reached 0
  std::vector<std::shared_ptr<ServeJob>> inbox_, cancels_;
  bool cancel_all_ = false, closed_ = false, stopping_ = false;

  std::set<std::shared_ptr<ServeJob>> active_;  // loop thread only: submitted, not all choices finished
  std::thread thread_;
};

}  // namespace dew::serve
