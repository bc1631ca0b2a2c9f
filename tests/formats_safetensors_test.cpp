// safetensors: every dtype against a file the PyPI safetensors package wrote, dew's own round trip, and
// sharded checkpoints (index, errors, interrupted saves).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>

#include "dew/core/error.h"
#include "dew/formats/safetensors.h"
#include "dew/formats/safetensors_checkpoint.h"
#include "test_support.h"

namespace dew::formats {
namespace {

namespace fs = std::filesystem;

const std::vector<std::pair<std::string, c10::ScalarType>> kDtypes = {
    {"F64", at::kDouble},  {"F32", at::kFloat},   {"F16", at::kHalf},     {"BF16", at::kBFloat16},
    {"I64", at::kLong},    {"I32", at::kInt},     {"I16", at::kShort},    {"I8", at::kChar},
    {"U8", at::kByte},     {"BOOL", at::kBool},   {"U16", at::kUInt16},   {"U32", at::kUInt32},
    {"U64", at::kUInt64},  {"F8_E4M3", at::kFloat8_e4m3fn}, {"F8_E5M2", at::kFloat8_e5m2},
};

// What tools/reference/make_gguf_fixtures.py stored for each dtype.
at::Tensor reference_values(const std::string& name, c10::ScalarType type) {
  auto base = at::arange(12, at::kDouble).reshape({3, 4});
  if (name == "BOOL") {
    base = base.remainder(2);
  } else if (name[0] != 'U') {
    base = base - 5;
  }
  return base.to(type);
}

bool same(const at::Tensor& a, const at::Tensor& b) {
  // Compare as doubles: equal() lacks kernels for the float8 and wide unsigned types.
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && at::equal(a.to(at::kDouble), b.to(at::kDouble));
}

TEST(Safetensors, ReadsEveryDtypeThePyPIPackageWrites) {
  SafetensorsFile file(dew::test::fixtures() / "safetensors" / "dtypes.safetensors");
  EXPECT_EQ(file.metadata().at("format"), "pt");
  ASSERT_EQ(file.names().size(), kDtypes.size());
  for (const auto& [name, type] : kDtypes) {
    SCOPED_TRACE(name);
    EXPECT_EQ(file.entry(name).dtype, name);
    EXPECT_TRUE(same(file.view(name), reference_values(name, type)));
  }
}

TEST(Safetensors, EveryDtypeRoundTrips) {
  dew::test::TempDir dir;
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, type] : kDtypes) tensors[name] = reference_values(name, type);
  tensors["empty"] = at::empty({0, 3});
  tensors["scalar"] = at::full({}, 2.5);
  save_safetensors(dir / "all.safetensors", tensors, {{"who", "dew"}});
  SafetensorsFile file(dir / "all.safetensors");
  EXPECT_EQ(file.metadata().at("who"), "dew");
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(same(file.view(name), t));
    EXPECT_TRUE(same(file.load(name), t));
  }
  EXPECT_EQ(file.load("F16", at::kFloat).scalar_type(), at::kFloat);
}

TEST(Safetensors, HeaderErrorsNameTheFileAndTensor) {
  dew::test::TempDir dir;
  auto write = [&](const std::string& header, std::size_t data_bytes) {
    std::string text(8, '\0');
    std::uint64_t n = header.size();
    std::memcpy(text.data(), &n, 8);
    text += header;
    text.append(data_bytes, '\0');
    dew::test::write_text(dir / "bad.safetensors", text);
  };
  auto expect = [&](const std::string& fragment) {
    try {
      SafetensorsFile file(dir / "bad.safetensors");
      FAIL() << "accepted";
    } catch (const dew::Error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("bad.safetensors"), std::string::npos) << m;
      EXPECT_NE(m.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << m;
    }
  };
  write(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4);
  expect("tensor 'w'");
  write(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8);
  expect("needs 12 bytes");
  write(R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8);
  expect("unknown dtype 'Q4'");
  write(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8);
  expect("overlap");
  write(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8);
  expect("tensor 'a': appears twice");
  write(R"({"w":)", 0);
  expect("not valid JSON");
  std::string huge(8, '\0');
  std::uint64_t n = 1ull << 40;
  std::memcpy(huge.data(), &n, 8);
  dew::test::write_text(dir / "bad.safetensors", huge);
  expect("100 MB");
}

std::vector<std::pair<std::string, at::Tensor>> some_tensors() {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (int i = 0; i < 5; ++i) out.emplace_back("layer." + std::to_string(i) + ".w", at::arange(100 * (i + 1), at::kFloat) * (i + 1));
  out.emplace_back("ids", at::arange(7, at::kLong));
  return out;
}

void expect_checkpoint_holds(const fs::path& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  SafetensorsCheckpoint ckpt(path);
  EXPECT_EQ(ckpt.names().size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(ckpt.has(name));
    EXPECT_TRUE(same(ckpt.view(name), t));
  }
}

TEST(SafetensorsCheckpoint, OneFileWhenItFits) {
  dew::test::TempDir dir;
  auto tensors = some_tensors();
  auto files = write_safetensors_checkpoint(dir / "out", tensors);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].filename(), "model.safetensors");
  EXPECT_FALSE(fs::exists(dir / "out" / "model.safetensors.index.json"));
  expect_checkpoint_holds(dir / "out", tensors);
  expect_checkpoint_holds(dir / "out" / "model.safetensors", tensors);
  EXPECT_EQ(SafetensorsFile(dir / "out" / "model.safetensors").metadata().at("format"), "pt");
}

TEST(SafetensorsCheckpoint, ShardsWithAnIndexLikeTransformers) {
  dew::test::TempDir dir;
  auto tensors = some_tensors();  // 400, 800, 1200, 1600, 2000 and 56 bytes
  auto files = write_safetensors_checkpoint(dir / "out", tensors, 2000, {{"note", "x"}});
  // Greedy in order: [400, 800] [1200] [1600] [2000] [56]
  ASSERT_EQ(files.size(), 6u);
  EXPECT_EQ(files[0].filename(), "model-00001-of-00005.safetensors");
  EXPECT_EQ(files[4].filename(), "model-00005-of-00005.safetensors");
  EXPECT_EQ(files[5].filename(), "model.safetensors.index.json");
  auto index = nlohmann::json::parse(dew::test::read_text(dir / "out" / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], 400 + 800 + 1200 + 1600 + 2000 + 56);
  EXPECT_EQ(index["weight_map"]["layer.1.w"], "model-00001-of-00005.safetensors");
  EXPECT_EQ(index["weight_map"]["ids"], "model-00005-of-00005.safetensors");
  expect_checkpoint_holds(dir / "out", tensors);
  SafetensorsCheckpoint ckpt(dir / "out");
  EXPECT_EQ(ckpt.file_of("layer.2.w").filename(), "model-00002-of-00005.safetensors");
  EXPECT_EQ(ckpt.entry("ids").dtype, "I64");
  EXPECT_EQ(SafetensorsFile(files[0]).metadata().at("note"), "x");
  EXPECT_EQ(SafetensorsFile(files[0]).metadata().at("format"), "pt");
}

TEST(SafetensorsCheckpoint, ANewExportReplacesAnOldOneWithADifferentShardCount) {
  dew::test::TempDir dir;
  auto tensors = some_tensors();
  write_safetensors_checkpoint(dir / "out", tensors, 2000);  // 5 shards
  auto smaller = tensors;
  smaller.resize(3);
  write_safetensors_checkpoint(dir / "out", smaller, 1300);  // 2 shards: [400, 800] [1200]
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir / "out")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                             "model.safetensors.index.json"}));
  expect_checkpoint_holds(dir / "out", smaller);
  write_safetensors_checkpoint(dir / "out", smaller);  // now one file: the shards and index go
  names.clear();
  for (const auto& e : fs::directory_iterator(dir / "out")) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"model.safetensors"}));
  expect_checkpoint_holds(dir / "out", smaller);
}

TEST(SafetensorsCheckpoint, AnInterruptedSaveLeavesThePreviousExportWhole) {
  dew::test::TempDir dir;
  auto tensors = some_tensors();
  write_safetensors_checkpoint(dir / "out", tensors, 2000);  // 5 shards + index
  // A save into 2 shards that stopped after writing its shards, before its index: the state it leaves.
  auto other = some_tensors();
  other.resize(2);
  std::map<std::string, at::Tensor> first{{other[0].first, other[0].second * 0}};
  save_safetensors(dir / "out" / "model-00001-of-00002.safetensors", first);
  expect_checkpoint_holds(dir / "out", tensors);  // the old index names only old shards
  // Likewise a single-file export over a sharded one: the old export reads until model.safetensors appears.
  write_safetensors_checkpoint(dir / "out", other);
  expect_checkpoint_holds(dir / "out", other);
  EXPECT_FALSE(fs::exists(dir / "out" / "model-00001-of-00002.safetensors"));
}

TEST(SafetensorsCheckpoint, IndexErrorsNameTheFileAndTensor) {
  dew::test::TempDir dir;
  auto tensors = some_tensors();
  write_safetensors_checkpoint(dir / "out", tensors, 2000);
  const auto index_path = dir / "out" / "model.safetensors.index.json";
  const auto good = nlohmann::json::parse(dew::test::read_text(index_path));
  auto expect = [&](const nlohmann::json& index, const std::vector<std::string>& fragments) {
    dew::test::write_text(index_path, index.dump());
    try {
      SafetensorsCheckpoint ckpt(dir / "out");
      FAIL() << "accepted";
    } catch (const dew::Error& e) {
      std::string m = e.what();
      for (const auto& f : fragments) EXPECT_NE(m.find(f), std::string::npos) << "'" << f << "' not in: " << m;
    }
  };
  auto missing = good;
  missing["weight_map"]["ids"] = "model-00009-of-00009.safetensors";
  expect(missing, {"model.safetensors.index.json", "'ids'", "model-00009-of-00009.safetensors", "missing"});
  auto wrong = good;
  wrong["weight_map"]["layer.0.w"] = "model-00002-of-00005.safetensors";
  expect(wrong, {"'layer.0.w'", "model-00002-of-00005.safetensors", "does not hold it", "it is in", "model-00001-of-00005"});
  auto nowhere = good;
  nowhere["weight_map"]["ids"] = "model-00001-of-00005.safetensors";  // shard 5 is no longer named: nobody holds it
  expect(nowhere, {"'ids'", "does not hold it", "no shard does"});
  auto outside = good;
  outside["weight_map"]["ids"] = "../elsewhere.safetensors";
  expect(outside, {"'ids'", "not a file name inside"});
  // A tensor held by two shards.
  dew::test::write_text(index_path, good.dump());
  std::map<std::string, at::Tensor> dup{{"ids", at::arange(3)}};
  save_safetensors(dir / "out" / "model-00002-of-00005.safetensors", dup);
  try {
    SafetensorsCheckpoint ckpt(dir / "out");
    FAIL() << "accepted";
  } catch (const dew::Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'ids' is held by both"), std::string::npos) << m;
  }
  EXPECT_THROW(SafetensorsCheckpoint(dir / "nothing"), dew::Error);
  fs::create_directories(dir / "empty");
  EXPECT_THROW(SafetensorsCheckpoint(dir / "empty"), dew::Error);
}

}  // namespace
}  // namespace dew::formats
