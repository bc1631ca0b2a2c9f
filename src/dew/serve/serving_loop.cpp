#include "dew/serve/serving_loop.h"

#include <cstdio>
#include <exception>

namespace dew::serve {

ServingLoop::ServingLoop(inference::Engine& engine, ServerMetrics& metrics, std::int64_t capacity)
    : engine_(engine), metrics_(metrics), capacity_(capacity) {
  thread_ = std::thread([this] { run(); });
}

ServingLoop::~ServingLoop() { stop(); }

ServingLoop::Admission ServingLoop::submit(const std::shared_ptr<ServeJob>& job) {
  const auto k = static_cast<std::int64_t>(job->choices());
  {
    std::lock_guard lock(mutex_);
    if (closed_) return Admission::closed;
    // Reserved under the lock, so two handlers cannot both take the last place.
    if (outstanding_.load() + k > capacity_) return Admission::full;
    outstanding_ += k;
    inbox_.push_back(job);
  }
  metrics_.set_outstanding(outstanding_.load());
  wake_.notify_one();
  return Admission::accepted;
}

void ServingLoop::cancel(const std::shared_ptr<ServeJob>& job) {
  job->request_cancel();
  {
    std::lock_guard lock(mutex_);
    cancels_.push_back(job);
  }
  wake_.notify_one();
}

void ServingLoop::close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
}

bool ServingLoop::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return idle_.wait_for(lock, timeout, [&] { return outstanding_.load() == 0; });
}

void ServingLoop::cancel_all() {
  {
    std::lock_guard lock(mutex_);
    cancel_all_ = true;
  }
  wake_.notify_one();
}

void ServingLoop::stop() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    stopping_ = true;
    cancel_all_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void ServingLoop::release(std::int64_t choices) {
  {
    std::lock_guard lock(mutex_);  // so wait_idle cannot miss the change between its check and its wait
    outstanding_ -= choices;
  }
  metrics_.set_outstanding(outstanding_.load());
  idle_.notify_all();
}

void ServingLoop::start_job(const std::shared_ptr<ServeJob>& job) {
  std::size_t submitted = 0;
  try {
    for (; submitted < job->choices(); ++submitted) {
      auto id = engine_.submit(job->requests[submitted],
                               [this, job, choice = submitted](const inference::EngineEvent& event) {
                                 return on_event(*job, choice, event);
                               });
      job->engine_ids.push_back(id);
    }
  } catch (const std::exception& e) {
    // The engine's checks name the field (prompt length, sampling); the request is the client's fault.
    for (auto id : job->engine_ids) engine_.cancel(id);  // their callbacks count them finished
    release(static_cast<std::int64_t>(job->choices() - submitted));
    job->accepted(ApiError(400, e.what(), "", "invalid_value"));
    return;
  }
  active_.insert(job);
  job->accepted(std::nullopt);
  if (job->cancel_requested()) {
    for (auto id : job->engine_ids) engine_.cancel(id);
  }
}

bool ServingLoop::on_event(ServeJob& job, std::size_t choice, const inference::EngineEvent& event) {
  // Runs inside Engine::step or Engine::cancel: it must not throw (the engine would end the request and
  // rethrow after the step), so every failure becomes the choice's error.
  try {
    auto& decoder = job.decoders[choice];
    if (event.finish == inference::FinishReason::running) {
      if (!job.first_token_seen) {
        job.first_token_seen = true;
        metrics_.record_first_token(std::chrono::duration<double>(ServeJob::Clock::now() - job.arrived).count());
      }
      if (!event.prompt.empty()) {  // echo with logprobs: the prompt's entries come first
        std::vector<PromptTokenScore> scores;
        scores.reserve(event.prompt.size());
        for (const auto& scored : event.prompt) scores.push_back({scored.logprob, scored.top});
        job.push({.choice = choice, .delta = decoder.prompt_logprobs(job.requests[choice].prompt, scores)});
      }
      const auto& token = *event.token;
      auto delta = decoder.push(token.id, token.logprob, token.top);
      if (!delta.empty()) job.push({.choice = choice, .delta = std::move(delta)});
      return !decoder.stopped() && !job.cancel_requested();
    }
    const char* reason = "stop";
    switch (event.finish) {
      case inference::FinishReason::length: reason = "length"; break;
      case inference::FinishReason::cancelled: reason = "cancelled"; break;
      case inference::FinishReason::error: reason = "error"; break;
      case inference::FinishReason::stopped: reason = job.cancel_requested() ? "cancelled" : "stop"; break;
      default: break;
    }
    ChoiceUpdate update{.choice = choice, .delta = decoder.finish(reason), .final = true,
                        .completion_tokens = event.completion_tokens,
                        .cached_prompt_tokens = event.cached_prompt_tokens, .error = event.error};
    job.push(std::move(update));
  } catch (const std::exception& e) {
    job.push({.choice = choice, .delta = {.finish_reason = std::string("error")}, .final = true, .error = e.what()});
  }
  // Not erased from active_ here: this runs inside the job's own callback, which the set's reference may
  // be the last one keeping alive. run() sweeps finished jobs after the step.
  ++job.finished_choices;
  release(1);
  return false;
}

void ServingLoop::run() {
  bool busy = false;  // the engine has waiting or running requests
  for (;;) {
    std::vector<std::shared_ptr<ServeJob>> incoming, cancels;
    bool everything = false;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || busy || cancel_all_ || !inbox_.empty() || !cancels_.empty(); });
      incoming.swap(inbox_);
      cancels.swap(cancels_);
      everything = std::exchange(cancel_all_, false);
      if (stopping_ && !busy && incoming.empty() && active_.empty()) break;
    }
    try {
      for (auto& job : incoming) {
        if (everything) job->request_cancel();
        start_job(job);
      }
      if (everything) {
        for (const auto& job : active_) job->request_cancel();
        for (const auto& job : std::vector<std::shared_ptr<ServeJob>>(active_.begin(), active_.end()))
          for (auto id : job->engine_ids) engine_.cancel(id);
      }
      for (auto& job : cancels)
        for (auto id : job->engine_ids) engine_.cancel(id);  // unknown or finished ids are ignored
      const bool stepped = engine_.step();
      busy = !engine_.idle();
      auto stats = engine_.stats();
      metrics_.record_step(stats.waiting, stats.running, stats.prompt_tokens, stats.generated_tokens, stepped);
      metrics_.set_cached_prompt_tokens(stats.cached_prompt_tokens);
    } catch (const std::exception& e) {
      // Not expected (forward errors end their requests inside step): end everything rather than spin.
      std::fprintf(stderr, "dew serve: engine error: %s; cancelling the requests in flight\n", e.what());
      for (const auto& job : std::vector<std::shared_ptr<ServeJob>>(active_.begin(), active_.end()))
        for (auto id : job->engine_ids) engine_.cancel(id);
      busy = !engine_.idle();
    }
    std::erase_if(active_, [](const std::shared_ptr<ServeJob>& job) { return job->finished_choices == job->choices(); });
  }
}

}  // namespace dew::serve
