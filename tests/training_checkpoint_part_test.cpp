// A sharded checkpoint's manifest and files, read whole or by rows, and every way they can be damaged.
// (The processes that write them are tested in distributed_training_test.cpp.)
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "dew/core/error.h"
#include "dew/formats/safetensors.h"
#include "dew/training/checkpoint.h"
#include "dew/training/checkpoint_part.h"
#include "test_support.h"

namespace fs = std::filesystem;
using dew::test::TempDir;
using dew::training::ShardedTensorLayout;

namespace {

// What three processes holding row blocks of 3 write for a [7, 2] matrix, a [2] vector and a scalar that
// only rank 0 keeps: rows [0,3) [3,6) [6,7); [0,2) [2,2) [2,2); [0,1) [1,1) [1,1).
struct Sharded {
  at::Tensor matrix = at::arange(14, at::kFloat).reshape({7, 2});
  at::Tensor vector = at::tensor({5.0f, 6.0f});
  at::Tensor scalar = at::scalar_tensor(9.0, at::kLong);
  std::map<std::string, ShardedTensorLayout> layout{
      {"m", {{7, 2}, {{0, 3}, {3, 6}, {6, 7}}}},
      {"v", {{2}, {{0, 2}, {2, 2}, {2, 2}}}},
      {"s", {{}, {{0, 1}, {1, 1}, {1, 1}}}},
  };

  void write(const fs::path& dir) const {
    fs::create_directories(dir);
    for (std::int64_t rank = 0; rank < 3; ++rank) {
      std::map<std::string, at::Tensor> mine{{"m", matrix.narrow(0, layout.at("m").ranges[rank].first,
                                                                 layout.at("m").ranges[rank].second - layout.at("m").ranges[rank].first)}};
      if (rank == 0) {
        mine["v"] = vector;
        mine["s"] = scalar.reshape({1});
      }
      dew::formats::save_safetensors(dir / dew::training::shard_file_name("params", rank, 3), mine);
    }
    std::ofstream(dir / dew::training::kShardManifest) << dew::training::shard_manifest(3, {{"params", layout}}).dump(1);
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const dew::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(CheckpointPart, AssemblesWholeTensorsAndReadsRowsAcrossFiles) {
  TempDir dir;
  Sharded s;
  s.write(dir.path());
  auto parts = dew::training::open_sharded_parts(dir.path());
  ASSERT_EQ(parts.count("params"), 1u);
  const auto& part = parts.at("params");
  EXPECT_TRUE(part.sharded());
  EXPECT_EQ(part.names(), (std::vector<std::string>{"m", "s", "v"}));
  EXPECT_TRUE(at::equal(part.whole("m"), s.matrix));
  EXPECT_TRUE(at::equal(part.whole("v"), s.vector));
  EXPECT_EQ(part.whole("s").dim(), 0);
  EXPECT_EQ(part.whole("s").item<std::int64_t>(), 9);
  // Rows 2..6 lie in all three files; what a process of another world would read.
  EXPECT_TRUE(at::equal(part.rows("m", 2, 7), s.matrix.narrow(0, 2, 5)));
  EXPECT_TRUE(at::equal(part.rows("m", 4, 5), s.matrix.narrow(0, 4, 1)));
  EXPECT_EQ(part.rows("m", 7, 7).sizes(), (std::vector<std::int64_t>{0, 2}));
}

TEST(CheckpointPart, DamagedShardsAreNamed) {
  Sharded s;
  {  // A file missing.
    TempDir dir;
    s.write(dir.path());
    fs::remove(dir.path() / "params.rank00001-of-00003.safetensors");
    const auto e = error_of([&] { dew::training::open_sharded_parts(dir.path()); });
    EXPECT_NE(e.find("params.rank00001-of-00003.safetensors' that"), std::string::npos) << e;
    EXPECT_NE(e.find("is missing"), std::string::npos) << e;
  }
  {  // A file with the wrong rows.
    TempDir dir;
    s.write(dir.path());
    dew::formats::save_safetensors(dir.path() / "params.rank00002-of-00003.safetensors", {{"m", s.matrix.narrow(0, 0, 2)}});
    const auto e = error_of([&] { dew::training::open_sharded_parts(dir.path()); });
    EXPECT_NE(e.find("tensor 'm' has shape [2, 2] but"), std::string::npos) << e;
  }
  {  // A tensor the manifest does not list.
    TempDir dir;
    s.write(dir.path());
    dew::formats::save_safetensors(dir.path() / "params.rank00002-of-00003.safetensors",
                                   {{"m", s.matrix.narrow(0, 6, 1)}, {"extra", s.vector}});
    const auto e = error_of([&] { dew::training::open_sharded_parts(dir.path()); });
    EXPECT_NE(e.find("holds tensor 'extra', which"), std::string::npos) << e;
  }
  {  // Ranges that overlap, leave a gap or do not cover the rows; a file name leading elsewhere; another world.
    const std::vector<std::pair<std::string, std::string>> edits{
        {"\"rows\": [[0, 3], [3, 6], [6, 7]]", "rows [2, 6) but the ranks before end at row 3"},
        {"\"world\": 3", "entry 0 must be \"params.rank00000-of-00004.safetensors\""},
        {"\"params.rank00000-of-00003.safetensors\"", "entry 0 must be \"params.rank00000-of-00003.safetensors\""},
        {"\"format\"", "field 'format' must be"},
    };
    for (const auto& [what, expected] : edits) {
      TempDir dir;
      s.write(dir.path());
      std::string text = dew::test::read_text(dir.path() / "shards.json");
      auto j = nlohmann::json::parse(text);
      if (what.find("rows") != std::string::npos) j["parts"]["params"]["tensors"]["m"]["rows"][1] = {2, 6};
      if (what.find("world") != std::string::npos) j["world"] = 4;
      if (what.find("rank00000") != std::string::npos) j["parts"]["params"]["files"][0] = "../elsewhere.safetensors";
      if (what.find("format") != std::string::npos) j["format"] = "something else";
      std::ofstream(dir.path() / "shards.json") << j.dump();
      const auto e = error_of([&] { dew::training::open_sharded_parts(dir.path()); });
      EXPECT_NE(e.find(expected), std::string::npos) << e;
      EXPECT_NE(e.find("shards.json"), std::string::npos) << e;
    }
  }
}
