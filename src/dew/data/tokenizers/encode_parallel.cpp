#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "dew/core/threads.h"
#include "dew/data/tokenizers/tokenizer.h"

namespace dew::data {
namespace {

// Worker threads that outlive one call: a tokenizer's piece cache is per thread, so fresh threads (as
// parallel_for makes) start cold on every call and a second thread gains little over one warm thread. These
// stay, and keep their caches warm from one call to the next.
class EncodePool {
 public:
  static EncodePool& instance() {
    static EncodePool pool;
    return pool;
  }

  // Runs body(i) for i in [0, count) on the calling thread and up to helpers pool threads.
  void run(std::size_t count, std::size_t helpers, const std::function<void(std::size_t)>& body) {
    std::unique_lock call_lock(call_mutex_);  // one call at a time; others wait their turn
    {
      std::lock_guard lock(mutex_);
      while (threads_.size() < helpers) threads_.emplace_back([this] { serve(); });
      body_ = &body;
      count_ = count;
      next_ = 0;
      active_ = helpers;
      wanted_ = helpers;
      ++generation_;
    }
    wake_.notify_all();
    work();
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return active_ == 0; });
    body_ = nullptr;
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

  ~EncodePool() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  void work() {
    while (true) {
      std::size_t i;
      {
        std::lock_guard lock(mutex_);
        if (next_ >= count_) return;
        i = next_++;
      }
      try {
        (*body_)(i);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
        next_ = count_;
      }
    }
  }

  void serve() {
    std::uint64_t seen = 0;
    std::unique_lock lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return stop_ || (generation_ != seen && wanted_ > 0); });
      if (stop_) return;
      seen = generation_;
      --wanted_;
      lock.unlock();
      work();
      lock.lock();
      if (--active_ == 0) done_.notify_all();
    }
  }

  std::mutex call_mutex_, mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(std::size_t)>* body_ = nullptr;
  std::size_t count_ = 0, next_ = 0, active_ = 0, wanted_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace

std::vector<TokenId> encode_parallel(const Tokenizer& tokenizer, std::string_view text, int threads,
                                     bool allow_special) {
  if (threads <= 0) threads = available_threads();
  constexpr std::size_t kMinChunk = 1 << 20;  // below this, threads cost more than they save
  if (threads == 1 || text.size() < 2 * kMinChunk) return tokenizer.encode(text, allow_special);

  // Several chunks per thread balance uneven text; each cut is one the tokenizer vouches for.
  std::size_t target = std::max(kMinChunk, text.size() / (static_cast<std::size_t>(threads) * 4));
  std::vector<std::size_t> cuts{0};
  while (cuts.back() < text.size()) {
    std::size_t from = cuts.back() + target;
    if (from >= text.size()) {
      cuts.push_back(text.size());
      break;
    }
    cuts.push_back(tokenizer.safe_cut(text, from, std::min(text.size(), from + target)));
  }
  std::vector<std::vector<TokenId>> parts(cuts.size() - 1);
  std::size_t helpers = std::min<std::size_t>(static_cast<std::size_t>(threads), parts.size()) - 1;
  EncodePool::instance().run(parts.size(), helpers, [&](std::size_t i) {
    parts[i] = tokenizer.encode(text.substr(cuts[i], cuts[i + 1] - cuts[i]), allow_special);
  });
  std::size_t total = 0;
  for (const auto& p : parts) total += p.size();
  std::vector<TokenId> ids;
  ids.reserve(total);
  for (const auto& p : parts) ids.insert(ids.end(), p.begin(), p.end());
  return ids;
}

}  // namespace dew::data
