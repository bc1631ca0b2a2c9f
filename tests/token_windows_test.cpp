#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <set>

#include "dew/core/error.h"
#include "dew/data/record_order.h"
#include "dew/data/token_windows.h"
#include "test_support.h"
#include "token_test_support.h"

using dew::test::error_of;

namespace {
using namespace dew::data;
using dew::test::TempDir;

std::vector<std::int64_t> row(const at::Tensor& t, std::int64_t r) {
  auto c = t[r].contiguous();
  return {c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel()};
}

// First id of every row: with ids = 0, 1, 2, ... a window's first id is its start.
std::vector<std::int64_t> starts(const Batch& b) {
  std::vector<std::int64_t> out;
  for (std::int64_t r = 0; r < b.rows(); ++r) out.push_back(b.get("text")[r][0].item<std::int64_t>());
  return out;
}

TEST(TokenWindows, RecordCountFollowsTheFormula) {
  EXPECT_EQ(TokenWindows::count_windows(100, 9, 9), 11);  // floor((100 - 10) / 9) + 1
  EXPECT_EQ(TokenWindows::count_windows(100, 9, 10), 10);
  EXPECT_EQ(TokenWindows::count_windows(100, 9, 4), 23);  // floor(90 / 4) + 1
  EXPECT_EQ(TokenWindows::count_windows(10, 9, 9), 1);
  EXPECT_EQ(TokenWindows::count_windows(9, 9, 9), 0);
}

TEST(TokenWindows, RecordsAreWindowsOfSeqLenPlusOne) {
  TempDir dir;
  dew::test::write_token_dir(dir.path(), dew::test::iota_ids(1000, 1000), dew::test::iota_ids(50, 50), 1000);
  TokenLoaderOptions val;
  val.split = Split::val;
  TokenWindows windows(dir.path(), 9, val);  // validation: in order
  EXPECT_EQ(windows.records(), 5);            // floor((50 - 10) / 9) + 1
  Batch b = windows.next_batch(2);
  EXPECT_EQ(b.get("text").sizes(), (std::vector<std::int64_t>{2, 10}));
  EXPECT_EQ(b.get("text").scalar_type(), at::kLong);
  EXPECT_EQ(row(b.get("text"), 0), (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(row(b.get("text"), 1), (std::vector<std::int64_t>{9, 10, 11, 12, 13, 14, 15, 16, 17, 18}));
  EXPECT_EQ(windows.position(), 2);
  EXPECT_EQ(starts(windows.next_batch(2)), (std::vector<std::int64_t>{18, 27}));
  EXPECT_EQ(starts(windows.next_batch(2)), (std::vector<std::int64_t>{36, 0}));  // wraps into epoch 2

  TokenWindows strided(dir.path(), 9, 4, val);
  EXPECT_EQ(strided.records(), 11);  // floor(40 / 4) + 1
  EXPECT_EQ(starts(strided.next_batch(3)), (std::vector<std::int64_t>{0, 4, 8}));
}

TEST(TokenWindows, TrainingOrderIsAPermutationReshuffledEachEpoch) {
  TempDir dir;
  dew::test::write_token_dir(dir.path(), dew::test::iota_ids(1000, 1000), {1, 2}, 1000);
  TokenLoaderOptions options;
  options.seed = 7;
  TokenWindows a(dir.path(), 9, options);
  ASSERT_EQ(a.records(), 111);  // floor(990 / 9) + 1
  std::vector<std::int64_t> epoch1, epoch2;
  for (int i = 0; i < 3; ++i) {
    auto s = starts(a.next_batch(37));
    epoch1.insert(epoch1.end(), s.begin(), s.end());
  }
  for (int i = 0; i < 3; ++i) {
    auto s = starts(a.next_batch(37));
    epoch2.insert(epoch2.end(), s.begin(), s.end());
  }
  std::vector<std::int64_t> all;
  for (std::int64_t i = 0; i < 111; ++i) all.push_back(i * 9);
  auto sorted1 = epoch1, sorted2 = epoch2;
  std::sort(sorted1.begin(), sorted1.end());
  std::sort(sorted2.begin(), sorted2.end());
  EXPECT_EQ(sorted1, all);  // every window once per epoch
  EXPECT_EQ(sorted2, all);
  EXPECT_NE(epoch1, all);  // shuffled
  EXPECT_NE(epoch1, epoch2);  // reshuffled

  TokenWindows same(dir.path(), 9, options);  // same seed: same order
  std::vector<std::int64_t> again;
  for (int i = 0; i < 3; ++i) {
    auto s = starts(same.next_batch(37));
    again.insert(again.end(), s.begin(), s.end());
  }
  EXPECT_EQ(again, epoch1);
  options.seed = 8;
  TokenWindows other(dir.path(), 9, options);
  EXPECT_NE(starts(other.next_batch(37)), std::vector<std::int64_t>(epoch1.begin(), epoch1.begin() + 37));
}

TEST(TokenWindows, ThePermutationIsPinned) {
  // The order must not change between builds or platforms: resumed runs depend on it.
  EXPECT_EQ(shuffled_indices(8, 0, 0), shuffled_indices(8, 0, 0));
  auto p = shuffled_indices(10, 1234, 3);
  auto sorted = p;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // SplitMix64 + Fisher-Yates, recomputed independently in Python when this test was written.
  EXPECT_EQ(p, (std::vector<std::int64_t>{8, 2, 6, 3, 9, 5, 4, 1, 7, 0}));
}

TEST(TokenWindows, ResumeFromASavedPositionGivesTheSameBatches) {
  TempDir dir;
  dew::test::write_token_dir(dir.path(), dew::test::iota_ids(3000, 3000), {1, 2}, 3000);
  TokenLoaderOptions options;
  options.seed = 3;
  TokenWindows uninterrupted(dir.path(), 15, options);  // 187 records: batches of 8 straddle epochs
  std::vector<at::Tensor> expected;
  for (int i = 0; i < 60; ++i) expected.push_back(uninterrupted.next_batch(8).get("text"));

  TokenWindows first(dir.path(), 15, options);
  for (int i = 0; i < 37; ++i) first.next_batch(8);
  std::int64_t saved = first.position();
  EXPECT_EQ(saved, 37 * 8);
  TokenWindows resumed(dir.path(), 15, options);
  resumed.set_position(saved);
  for (int i = 37; i < 60; ++i) EXPECT_TRUE(at::equal(resumed.next_batch(8).get("text"), expected[i])) << "batch " << i;
}

TEST(TokenWindows, RanksReadDisjointRecordsWhoseUnionIsTheGlobalBatch) {
  TempDir dir;
  dew::test::write_token_dir(dir.path(), dew::test::iota_ids(2000, 2000), {1, 2}, 2000);
  TokenLoaderOptions single;
  single.seed = 11;
  TokenWindows global(dir.path(), 9, single);
  const std::int64_t world = 3, per_rank = 4;
  std::vector<std::unique_ptr<TokenWindows>> ranks;
  for (std::int64_t r = 0; r < world; ++r) {
    TokenLoaderOptions o = single;
    o.rank = r;
    o.world = world;
    ranks.push_back(std::make_unique<TokenWindows>(dir.path(), 9, o));
  }
  ASSERT_EQ(global.records(), 222);
  std::set<std::int64_t> first_epoch;  // records all ranks read in the first 18 steps (216 of 222)
  for (int step = 0; step < 30; ++step) {  // 30 * 12 = 360 records: crosses into the second epoch
    auto whole = starts(global.next_batch(per_rank * world));
    std::vector<std::int64_t> united(whole.size());
    for (std::int64_t r = 0; r < world; ++r) {
      auto part = starts(ranks[r]->next_batch(per_rank));
      for (std::int64_t j = 0; j < per_rank; ++j) {
        united[j * world + r] = part[j];  // rank r holds global rows r, r + world, ...
        if (step < 18) first_epoch.insert(part[j]);
      }
      EXPECT_EQ(ranks[r]->position(), global.position());
    }
    EXPECT_EQ(united, whole) << "step " << step;
  }
  EXPECT_EQ(first_epoch.size(), 216u);  // no record read twice, by one rank or two
}

TEST(TokenWindows, TooLittleDataNamesTheFile) {
  TempDir dir;
  dew::test::write_token_dir(dir.path(), dew::test::iota_ids(25, 256), {1, 2, 3}, 256);
  auto msg = error_of([&] { TokenWindows w(dir.path(), 30); });
  EXPECT_NE(msg.find("train.bin' holds 25 tokens, fewer than one window of seq_len + 1 = 31"), std::string::npos) << msg;
  TokenWindows w(dir.path(), 9);  // 2 records
  msg = error_of([&] { w.next_batch(3); });
  EXPECT_NE(msg.find("train.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("holds 2 records, fewer than one batch of 3 rows"), std::string::npos) << msg;
  TokenLoaderOptions val;
  val.split = Split::val;
  msg = error_of([&] { TokenWindows v(dir.path(), 9, val); });
  EXPECT_NE(msg.find("val.bin' holds 3 tokens"), std::string::npos) << msg;
}

TEST(TokenWindows, IdsOutsideTheVocabularyAreRefusedWhenOpened) {
  TempDir dir;
  auto ids = dew::test::iota_ids(40, 200);
  ids[25] = 70000;
  dew::test::write_token_dir(dir.path(), ids, {1}, 80000);
  auto meta = dew::test::read_text(dir / "meta.json");
  meta.replace(meta.find("80000"), 5, "65536");  // a vocabulary the file's dtype still holds
  dew::test::write_text(dir / "meta.json", meta);
  TokenLoaderOptions val;
  val.shuffle = false;
  // Found when the split is opened (one scan), not when the window [18, 28) holding it comes up.
  auto msg = error_of([&] { TokenWindows w(dir.path(), 9, val); });
  EXPECT_NE(msg.find("train.bin': token 25 has id 70000, outside the vocabulary [0, 65536)"), std::string::npos) << msg;
}

}  // namespace
