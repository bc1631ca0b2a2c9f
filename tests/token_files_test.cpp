#include <gtest/gtest.h>

#include "dew/core/error.h"
#include "dew/data/token_files.h"
#include "test_support.h"
#include "token_test_support.h"

using dew::test::error_of;

namespace {
using namespace dew::data;
using dew::test::read_text;
using dew::test::TempDir;
using dew::test::write_text;

TEST(TokenFiles, DtypeIsTheSmallestThatHoldsTheVocabulary) {
  EXPECT_EQ(dtype_for_vocab(256), TokenDtype::uint8);
  EXPECT_EQ(dtype_for_vocab(257), TokenDtype::uint16);
  EXPECT_EQ(dtype_for_vocab(50257), TokenDtype::uint16);
  EXPECT_EQ(dtype_for_vocab(65536), TokenDtype::uint16);
  EXPECT_EQ(dtype_for_vocab(65537), TokenDtype::uint32);
  EXPECT_EQ(dtype_for_vocab(151936), TokenDtype::uint32);
  EXPECT_EQ(dtype_bytes(TokenDtype::uint8), 1u);
  EXPECT_EQ(dtype_bytes(TokenDtype::uint16), 2u);
  EXPECT_EQ(dtype_bytes(TokenDtype::uint32), 4u);
  EXPECT_STREQ(dtype_name(TokenDtype::uint16), "uint16");
  EXPECT_THROW(dtype_for_vocab(0), dew::Error);
}

TEST(TokenFiles, WriterIsLittleEndianInTheDtype) {
  TempDir dir;
  TokenWriter w16(dir / "a.bin", TokenDtype::uint16);
  w16.write({1, 50256, 258});
  w16.close();
  EXPECT_EQ(read_text(dir / "a.bin"), std::string("\x01\x00\x50\xC4\x02\x01", 6));
  TokenWriter w32(dir / "b.bin", TokenDtype::uint32);
  w32.write({70000});
  w32.close();
  EXPECT_EQ(read_text(dir / "b.bin"), std::string("\x70\x11\x01\x00", 4));
  TokenWriter w8(dir / "c.bin", TokenDtype::uint8);
  EXPECT_THROW(w8.write({256}), dew::Error);  // does not fit uint8
}

TEST(TokenFiles, MetaRoundTripsAndReadsBackIds) {
  TempDir dir;
  dew::test::write_token_dir(dir.path(), {10, 50256, 7}, {3}, 50257, 50256, true);
  TokenFiles files(dir.path());
  EXPECT_EQ(files.meta().vocab_size, 50257);
  EXPECT_EQ(files.meta().dtype, TokenDtype::uint16);
  EXPECT_EQ(files.meta().train_tokens, 3);
  EXPECT_EQ(files.meta().val_tokens, 1);
  EXPECT_EQ(files.meta().eos_id, 50256);
  EXPECT_TRUE(files.meta().packed);
  TokenArray train = files.split(Split::train);
  ASSERT_EQ(train.size(), 3);
  EXPECT_EQ(train[0], 10);
  EXPECT_EQ(train[1], 50256);
  EXPECT_EQ(train[2], 7);
  EXPECT_EQ(files.split(Split::val)[0], 3);
  std::int64_t out[3];
  train.copy_checked(0, 3, out, 50257);
  EXPECT_EQ(out[1], 50256);
  auto text = read_text(dir / "meta.json");
  EXPECT_NE(text.find("\"dtype\": \"uint16\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"eos_id\": 50256"), std::string::npos) << text;
}

TEST(TokenFiles, SizeDisagreeingWithMetaNamesFileAndSizes) {
  TempDir dir;
  dew::test::write_token_dir(dir.path(), {1, 2, 3, 4}, {5}, 50257);
  write_text(dir / "train.bin", std::string(7, '\0'));  // 3.5 uint16 tokens
  auto msg = error_of([&] { TokenFiles files(dir.path()); });
  EXPECT_NE(msg.find("train.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("has 7 bytes, expected 8"), std::string::npos) << msg;
}

TEST(TokenFiles, DtypeDisagreeingWithFileIsRefused) {
  TempDir dir;
  dew::test::write_token_dir(dir.path(), {1, 2, 3, 4}, {5}, 256);  // uint8 files
  auto meta = read_text(dir / "meta.json");
  meta.replace(meta.find("\"uint8\""), 7, "\"uint16\"");
  write_text(dir / "meta.json", meta);
  auto msg = error_of([&] { TokenFiles files(dir.path()); });
  EXPECT_NE(msg.find("has 4 bytes, expected 8"), std::string::npos) << msg;

  meta.replace(meta.find("\"uint16\""), 8, "\"int64\"");
  write_text(dir / "meta.json", meta);
  msg = error_of([&] { TokenFiles files(dir.path()); });
  EXPECT_NE(msg.find("meta.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"int64\" is not a token dtype"), std::string::npos) << msg;
}

TEST(TokenFiles, DtypeTooSmallForVocabularyIsRefused) {
  TempDir dir;
  dew::test::write_token_dir(dir.path(), {1, 2}, {3}, 256);
  auto meta = read_text(dir / "meta.json");
  meta.replace(meta.find("256"), 3, "300");
  write_text(dir / "meta.json", meta);
  auto msg = error_of([&] { read_token_meta(dir.path()); });
  EXPECT_NE(msg.find("uint8 cannot hold ids up to vocab_size - 1 = 299"), std::string::npos) << msg;
}

TEST(TokenFiles, MissingAndMistypedFieldsAreNamed) {
  TempDir dir;
  dew::test::write_token_dir(dir.path(), {1, 2}, {3}, 256);
  auto good = read_text(dir / "meta.json");
  auto without = good;
  auto at = without.find("  \"documents\"");
  without.replace(at, without.find('\n', at) - at + 1, "");
  without.replace(without.rfind(','), 1, "");  // the field before it now ends the object
  write_text(dir / "meta.json", without);
  auto msg = error_of([&] { read_token_meta(dir.path()); });
  EXPECT_NE(msg.find("field 'documents' is missing"), std::string::npos) << msg;

  auto mistyped = good;
  mistyped.replace(mistyped.find("\"packed\": false"), 15, "\"packed\": 0");
  write_text(dir / "meta.json", mistyped);
  msg = error_of([&] { read_token_meta(dir.path()); });
  EXPECT_NE(msg.find("field 'packed' must be true or false"), std::string::npos) << msg;

  auto negative = good;
  negative.replace(negative.find("\"val_tokens\": 1"), 15, "\"val_tokens\": -1");
  write_text(dir / "meta.json", negative);
  msg = error_of([&] { read_token_meta(dir.path()); });
  EXPECT_NE(msg.find("field 'val_tokens' must not be negative"), std::string::npos) << msg;
}

TEST(TokenFiles, MissingFilesAreNamed) {
  TempDir dir;
  auto msg = error_of([&] { TokenFiles files(dir / "absent"); });
  EXPECT_NE(msg.find("absent' does not exist"), std::string::npos) << msg;
  msg = error_of([&] { TokenFiles files(dir.path()); });
  EXPECT_NE(msg.find("meta.json' does not exist"), std::string::npos) << msg;
  dew::test::write_token_dir(dir.path(), {1, 2}, {3}, 256);
  std::filesystem::remove(dir / "val.bin");
  msg = error_of([&] { TokenFiles files(dir.path()); });
  EXPECT_NE(msg.find("val.bin' does not exist"), std::string::npos) << msg;
}

TEST(TokenFiles, IdsOutsideTheVocabularyAreFoundWithTheirPosition) {
  TempDir dir;
  dew::test::write_token_dir(dir.path(), {5, 299, 40000, 7}, {1}, 50257);
  auto meta = read_text(dir / "meta.json");
  meta.replace(meta.find("50257"), 5, "300");  // the files claim a 300-id vocabulary
  write_text(dir / "meta.json", meta);
  TokenFiles files(dir.path());
  // A loader's split is checked when it is taken (before the first batch), not when the id comes up.
  auto msg = error_of([&] { files.split(Split::train); });
  EXPECT_NE(msg.find("train.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("token 2 has id 40000, outside the vocabulary [0, 300)"), std::string::npos) << msg;
  EXPECT_NO_THROW(check_ids_in_vocab(files.split(Split::val), 300));
  dew::MappedFile mapped(dir / "train.bin");
  TokenArray train(mapped.data(), 4, TokenDtype::uint16, dir / "train.bin");
  msg = error_of([&] { check_ids_in_vocab(train, 300); });
  EXPECT_NE(msg.find("token 2 has id 40000, outside the vocabulary [0, 300)"), std::string::npos) << msg;
  std::int64_t out[4];
  EXPECT_NO_THROW(train.copy_checked(0, 2, out, 300));
  EXPECT_THROW(train.copy_checked(1, 3, out, 300), dew::Error);
}

}  // namespace
