#include "dew/data/prefetcher.h"

#include "dew/core/error.h"

namespace dew::data {

Prefetcher::Prefetcher(std::unique_ptr<BatchSource> source, std::int64_t rows, std::size_t depth)
    : source_(std::move(source)), rows_(rows), depth_(depth), records_(source_ ? source_->records() : 0) {
  if (!source_) dew::fail("Prefetcher needs a batch source");
  if (rows_ < 1) dew::fail("batch size ", rows_, " must be at least 1");
  if (depth_ < 1) dew::fail("prefetch depth must be at least 1");
  consumer_position_ = source_->position();
  start();
}

Prefetcher::~Prefetcher() { stop(); }

void Prefetcher::start() {
  stopping_ = false;
  thread_ = std::thread([this] { produce(); });
}

void Prefetcher::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  not_full_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Prefetcher::produce() {
  while (true) {
    Item item;
    try {
      item.batch = source_->next_batch(rows_);
      item.position_after = source_->position();
    } catch (...) {
      item.error = std::current_exception();
    }
    const bool failed = static_cast<bool>(item.error);
    {
      std::unique_lock lock(mutex_);
      not_full_.wait(lock, [&] { return stopping_ || queue_.size() < depth_; });
      if (stopping_) return;
      queue_.push_back(std::move(item));
    }
    not_empty_.notify_one();
    if (failed) return;  // the consumer rethrows it; nothing after a failure is read
  }
}

Batch Prefetcher::next_batch(std::int64_t rows) {
  if (rows != rows_) {
    dew::fail("this prefetcher prepares batches of ", rows_, " rows, asked for ", rows, "; make a new one for ", rows);
  }
  std::unique_lock lock(mutex_);
  if (failed_) std::rethrow_exception(failed_);
  not_empty_.wait(lock, [&] { return !queue_.empty(); });
  Item item = std::move(queue_.front());
  queue_.pop_front();
  if (item.error) {
    failed_ = item.error;
    std::rethrow_exception(item.error);
  }
  consumer_position_ = item.position_after;
  lock.unlock();
  not_full_.notify_one();
  return std::move(item.batch);
}

std::int64_t Prefetcher::position() const {
  std::lock_guard lock(mutex_);
  return consumer_position_;
}

void Prefetcher::set_position(std::int64_t position) {
  stop();
  queue_.clear();
  failed_ = nullptr;
  source_->set_position(position);  // the thread is stopped: the source is ours alone here
  consumer_position_ = position;
  start();
}

std::size_t Prefetcher::ready() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
}

}  // namespace dew::data
