#pragma once
// Keeps up to `depth` batches of a BatchSource ready on a background thread, so reading and assembling
// batches overlaps the training step.
//
// The position it reports is that of the batches the consumer has taken, not of what the thread has
// prefetched: a checkpoint saved between steps resumes at the right batch. An exception in the thread
// reaches the consumer at the batch where it happened (the batches before it are still delivered). The
// destructor stops and joins the thread even while it waits on a full queue.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "dew/data/batch_source.h"

namespace dew::data {

class Prefetcher : public BatchSource {
 public:
  Prefetcher(std::unique_ptr<BatchSource> source, std::int64_t rows, std::size_t depth = 4);
  ~Prefetcher() override;
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // `rows` must be the batch size given at construction (the thread prepares batches of that size).
  Batch next_batch(std::int64_t rows) override;
  std::int64_t position() const override;
  // Drops the prefetched batches and restarts the thread at `position`.
  void set_position(std::int64_t position) override;
  std::int64_t records() const override { return records_; }

  std::size_t ready() const;  // batches waiting in the queue (for tests and diagnostics)

 private:
  struct Item {
    Batch batch;
    std::int64_t position_after = 0;
    std::exception_ptr error;
  };
  void start();
  void stop();
  void produce();

  std::unique_ptr<BatchSource> source_;
  const std::int64_t rows_;
  const std::size_t depth_;
  const std::int64_t records_;

  mutable std::mutex mutex_;
  std::condition_variable not_full_, not_empty_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  std::exception_ptr failed_;  // once the thread failed, every later next_batch rethrows it
  std::int64_t consumer_position_ = 0;
  std::thread thread_;
};

}  // namespace dew::data
