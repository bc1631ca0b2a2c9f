#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <functional>

#include "dew/core/error.h"
#include "dew/data/packed_tokens.h"
#include "test_support.h"
#include "token_test_support.h"

using dew::test::error_of;

namespace {
using namespace dew::data;
using dew::test::TempDir;

std::vector<std::int64_t> row(const Batch& b, const char* name, std::int64_t r) {
  auto c = b.get(name)[r].contiguous();
  return {c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel()};
}

constexpr TokenId E = 99;  // the EOS id in these tests

TEST(PackedTokens, PacksDocumentsFirstFitWithSegmentsAndPositions) {
  TempDir dir;
  // Documents (EOS kept): [1 2 3 E] [4 5 E] [6 7 8 9 10 11 12 E] (8 ids, longer than a row of 6) [13 E] [14 15]
  std::vector<TokenId> train{1, 2, 3, E, 4, 5, E, 6, 7, 8, 9, 10, 11, 12, E, 13, E, 14, 15};
  dew::test::write_token_dir(dir.path(), train, {1, E}, 100, E, true);
  TokenLoaderOptions in_order;
  in_order.shuffle = false;
  PackedTokens packed(dir.path(), 5, in_order);  // rows of 6
  // Pieces in order: [1 2 3 E](4) [4 5 E](3) [6..11](6) [12 E](2) [13 E](2) [14 15](2)
  // First fit: row0 = 4 + 2 ([12 E]); row1 = 3 + 2 ([13 E]); row2 = 6; [14 15] -> row1 has 1 free, row3.
  EXPECT_EQ(packed.packing().documents, 5);
  ASSERT_EQ(packed.records(), 4);
  Batch b = packed.next_batch(4);
  EXPECT_EQ(row(b, "text", 0), (std::vector<std::int64_t>{1, 2, 3, E, 12, E}));
  EXPECT_EQ(row(b, "text_segment_ids", 0), (std::vector<std::int64_t>{1, 1, 1, 1, 2, 2}));
  EXPECT_EQ(row(b, "text_positions", 0), (std::vector<std::int64_t>{0, 1, 2, 3, 0, 1}));
  EXPECT_EQ(row(b, "text", 1), (std::vector<std::int64_t>{4, 5, E, 13, E, 0}));
  EXPECT_EQ(row(b, "text_segment_ids", 1), (std::vector<std::int64_t>{1, 1, 1, 2, 2, 0}));
  EXPECT_EQ(row(b, "text_positions", 1), (std::vector<std::int64_t>{0, 1, 2, 0, 1, 0}));
  EXPECT_EQ(row(b, "text", 2), (std::vector<std::int64_t>{6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(row(b, "text_segment_ids", 2), (std::vector<std::int64_t>{1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(row(b, "text_positions", 2), (std::vector<std::int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(row(b, "text", 3), (std::vector<std::int64_t>{14, 15, 0, 0, 0, 0}));
  EXPECT_EQ(row(b, "text_segment_ids", 3), (std::vector<std::int64_t>{1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(row(b, "text_positions", 3), (std::vector<std::int64_t>{0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(b.get("text").sizes(), (std::vector<std::int64_t>{4, 6}));
}

TEST(PackedTokens, NoTokenIsLostAndRowsShuffleLikeWindows) {
  TempDir dir;
  // Documents of lengths 1..40 in a scrambled order, each ending in EOS: 820 ids.
  std::vector<TokenId> train;
  std::int64_t total = 0;
  for (int k = 0; k < 40; ++k) {
    int len = 1 + (k * 17) % 40;
    for (int i = 0; i + 1 < len; ++i) train.push_back(static_cast<TokenId>(1 + (k + i) % 90));
    train.push_back(E);
    total += len;
  }
  dew::test::write_token_dir(dir.path(), train, {E}, 100, E, true);
  TokenLoaderOptions options;
  options.seed = 5;
  PackedTokens packed(dir.path(), 15, options);  // rows of 16
  const std::int64_t rows = packed.records();
  EXPECT_GE(rows, (total + 15) / 16);
  EXPECT_EQ(packed.packing().documents, 40);
  Batch epoch = packed.next_batch(rows);
  auto segments = epoch.get("text_segment_ids");
  auto text = epoch.get("text");
  EXPECT_EQ((segments > 0).sum().item<std::int64_t>(), total);  // every token placed once
  EXPECT_EQ((text == E).sum().item<std::int64_t>(), 40);
  EXPECT_EQ((text * (segments > 0)).sum().item<std::int64_t>(),
            at::tensor(std::vector<std::int64_t>(train.begin(), train.end())).sum().item<std::int64_t>());
  EXPECT_EQ(text.masked_select(segments == 0).abs().sum().item<std::int64_t>(), 0);  // padding is id 0

  PackedTokens again(dir.path(), 15, options);
  EXPECT_TRUE(at::equal(again.next_batch(rows).get("text"), text));  // same seed, same order
  TokenLoaderOptions in_order;
  in_order.shuffle = false;
  PackedTokens ordered(dir.path(), 15, in_order);
  auto ordered_text = ordered.next_batch(rows).get("text");
  EXPECT_FALSE(at::equal(ordered_text, text));  // shuffled rows differ from file order
  EXPECT_TRUE(at::equal(std::get<0>(ordered_text.sum(1).sort()), std::get<0>(text.sum(1).sort())));  // same rows

  packed.set_position(rows * 3 + 2);  // resume inside epoch 4
  PackedTokens fresh(dir.path(), 15, options);
  for (int i = 0; i < 3; ++i) fresh.next_batch(rows);
  fresh.next_batch(2);
  EXPECT_TRUE(at::equal(packed.next_batch(3).get("text_positions"), fresh.next_batch(3).get("text_positions")));
}

TEST(PackedTokens, RanksShardTheRows) {
  TempDir dir;
  std::vector<TokenId> train;
  for (int k = 0; k < 60; ++k) {
    for (int i = 0; i < k % 7; ++i) train.push_back(static_cast<TokenId>(k + 1));
    train.push_back(E);
  }
  dew::test::write_token_dir(dir.path(), train, {E}, 100, E, true);
  TokenLoaderOptions global_options;
  global_options.seed = 2;
  PackedTokens global(dir.path(), 7, global_options);
  TokenLoaderOptions r0 = global_options, r1 = global_options;
  r0.world = r1.world = 2;
  r1.rank = 1;
  PackedTokens rank0(dir.path(), 7, r0), rank1(dir.path(), 7, r1);
  for (int step = 0; step < 5; ++step) {
    auto whole = global.next_batch(4).get("text");
    auto a = rank0.next_batch(2).get("text"), b = rank1.next_batch(2).get("text");
    EXPECT_TRUE(at::equal(at::stack({a[0], b[0], a[1], b[1]}), whole)) << "step " << step;
  }
}

TEST(PackedTokens, RefusesUnpackedDataAndBadIds) {
  TempDir dir;
  dew::test::write_token_dir(dir.path(), {1, 2, 3, 4}, {1}, 256);
  auto msg = error_of([&] { PackedTokens p(dir.path(), 3); });
  EXPECT_NE(msg.find("packed: false"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dew tokenize --pack"), std::string::npos) << msg;

  TempDir bad;
  dew::test::write_token_dir(bad.path(), {1, 2, 250, E}, {1}, 300, E, true);
  auto meta = dew::test::read_text(bad / "meta.json");
  meta.replace(meta.find("\"vocab_size\": 300"), 17, "\"vocab_size\": 200");
  dew::test::write_text(bad / "meta.json", meta);
  msg = error_of([&] { PackedTokens p(bad.path(), 3); });
  EXPECT_NE(msg.find("token 2 has id 250, outside the vocabulary [0, 200)"), std::string::npos) << msg;
}

}  // namespace
