#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <atomic>
#include <memory>
#include <thread>

#include "dew/core/error.h"
#include "dew/data/prefetcher.h"
#include "dew/data/token_windows.h"
#include "test_support.h"
#include "token_test_support.h"
#include "wait_until.h"

namespace {
using namespace dew::data;
using dew::test::TempDir;
using dew::test::wait_until;

TokenLoaderOptions seeded(std::uint64_t seed) {
  TokenLoaderOptions o;
  o.seed = seed;
  return o;
}

TEST(Prefetcher, GivesTheSameBatchesAsTheLoaderAndTracksTheConsumerPosition) {
  TempDir dir;
  dew::test::write_token_dir(dir.path(), dew::test::iota_ids(5000, 5000), {1, 2}, 5000);
  TokenWindows plain(dir.path(), 31, seeded(9));
  Prefetcher prefetched(std::make_unique<TokenWindows>(dir.path(), 31, seeded(9)), 6, 3);
  EXPECT_EQ(prefetched.records(), plain.records());
  for (int i = 0; i < 40; ++i) {  // 240 records: crosses the epoch of 156
    ASSERT_TRUE(at::equal(prefetched.next_batch(6).get("text"), plain.next_batch(6).get("text"))) << "batch " << i;
    EXPECT_EQ(prefetched.position(), plain.position());  // what was taken, not what is queued
  }
  EXPECT_TRUE(wait_until([&] { return prefetched.ready() == 3u; })) << prefetched.ready();  // the queue fills up ahead
  EXPECT_EQ(prefetched.ready(), 3u);  // and no further
  EXPECT_EQ(prefetched.position(), 240);

  // Resume at the consumer's position: a fresh loader continues exactly.
  TokenWindows resumed(dir.path(), 31, seeded(9));
  resumed.set_position(prefetched.position());
  EXPECT_TRUE(at::equal(resumed.next_batch(6).get("text"), prefetched.next_batch(6).get("text")));

  prefetched.set_position(12);  // jump back: queued batches are dropped
  TokenWindows at12(dir.path(), 31, seeded(9));
  at12.set_position(12);
  EXPECT_TRUE(at::equal(prefetched.next_batch(6).get("text"), at12.next_batch(6).get("text")));
  EXPECT_EQ(prefetched.position(), 18);
  EXPECT_THROW(prefetched.next_batch(5), dew::Error);  // a different batch size
}

TEST(Prefetcher, ShutsDownWithAFullQueue) {
  TempDir dir;
  dew::test::write_token_dir(dir.path(), dew::test::iota_ids(2000, 256), {1, 2}, 256);
  // Shared with the thread that destroys it, which a deadlock would leave running past this test.
  struct Shutdown {
    std::unique_ptr<Prefetcher> prefetcher;
    std::atomic<bool> done = false;
  };
  auto shutdown = std::make_shared<Shutdown>();
  shutdown->prefetcher = std::make_unique<Prefetcher>(std::make_unique<TokenWindows>(dir.path(), 15), 4, 2);
  ASSERT_TRUE(wait_until([&] { return shutdown->prefetcher->ready() == 2u; })) << shutdown->prefetcher->ready();
  EXPECT_EQ(shutdown->prefetcher->ready(), 2u);  // the thread now waits on a full queue
  std::thread destroyer([shutdown] {
    shutdown->prefetcher.reset();
    shutdown->done = true;
  });
  const bool done = wait_until([&] { return shutdown->done.load(); });
  if (done) {
    destroyer.join();
  } else {
    destroyer.detach();
  }
  EXPECT_TRUE(done) << "the destructor did not return: the thread waiting on the full queue was not woken";
}

// A source that fails at its third batch.
class FailingSource : public BatchSource {
 public:
  Batch next_batch(std::int64_t rows) override {
    if (++served_ == 3) dew::fail("disk vanished at batch 3");
    position_ += rows;
    Batch b;
    b.set("text", at::full({rows, 2}, served_, at::kLong));
    return b;
  }
  std::int64_t position() const override { return position_; }
  void set_position(std::int64_t p) override { position_ = p; }
  std::int64_t records() const override { return 100; }

 private:
  std::int64_t served_ = 0, position_ = 0;
};

TEST(Prefetcher, PropagatesTheSourcesErrorAfterTheGoodBatches) {
  Prefetcher p(std::make_unique<FailingSource>(), 2, 4);
  EXPECT_EQ(p.next_batch(2).get("text")[0][0].item<std::int64_t>(), 1);
  EXPECT_EQ(p.next_batch(2).get("text")[0][0].item<std::int64_t>(), 2);
  EXPECT_EQ(p.position(), 4);
  try {
    p.next_batch(2);
    FAIL() << "no error";
  } catch (const dew::Error& e) {
    EXPECT_STREQ(e.what(), "disk vanished at batch 3");
  }
  EXPECT_THROW(p.next_batch(2), dew::Error);  // and keeps failing rather than blocking
  EXPECT_EQ(p.position(), 4);
}

}  // namespace
