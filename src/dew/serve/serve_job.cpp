#include "dew/serve/serve_job.h"

namespace dew::serve {

std::optional<ApiError> ServeJob::wait_accepted() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return accepted_; });
  return submit_error_;
}

bool ServeJob::wait_updates(std::vector<ChoiceUpdate>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!changed_.wait_for(lock, timeout, [&] { return !updates_.empty(); })) return false;
  while (!updates_.empty()) {
    out.push_back(std::move(updates_.front()));
    updates_.pop_front();
  }
  return true;
}

void ServeJob::accepted(std::optional<ApiError> error) {
  {
    std::lock_guard lock(mutex_);
    accepted_ = true;
    submit_error_ = std::move(error);
  }
  changed_.notify_all();
}

void ServeJob::push(ChoiceUpdate update) {
  {
    std::lock_guard lock(mutex_);
    updates_.push_back(std::move(update));
  }
  changed_.notify_all();
}

}  // namespace dew::serve
