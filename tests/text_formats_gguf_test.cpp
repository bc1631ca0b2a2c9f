// GgufFile and the ggml block formats against gguf-py's files and values
// (tests/fixtures/gguf, made by tools/reference/make_gguf_fixtures.py), and against bad input.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>

#include "dew/core/error.h"
#include "dew/core/mapped_file.h"
#include "dew/formats/gguf_file.h"
#include "dew/formats/gguf_quants.h"
#include "dew/formats/safetensors_header.h"
#include "test_support.h"

namespace dew::formats {
namespace {

std::filesystem::path gguf_fixtures() { return dew::test::fixtures() / "gguf"; }

// The float32 tensors of expected.safetensors, read with the torch-free header parser.
class Expected {
 public:
  Expected() : map_(gguf_fixtures() / "expected.safetensors") {
    header_ = parse_safetensors_header(map_.data(), map_.size(), map_.path().string());
  }
  bool has(const std::string& name) const { return header_.entries.count(name) > 0; }
  std::vector<float> values(const std::string& name) const {
    const auto& e = header_.entries.at(name);
    EXPECT_EQ(e.dtype, "F32");
    std::vector<float> out((e.end - e.begin) / 4);
    std::memcpy(out.data(), map_.data() + header_.data_start + e.begin, e.end - e.begin);
    return out;
  }

 private:
  MappedFile map_;
  SafetensorsHeader header_;
};

std::vector<float> dequantized(const GgufFile& file, const GgufTensorInfo& info) {
  std::vector<float> out(static_cast<std::size_t>(info.elements()));
  dequantize(info.type, file.data(info), info.elements(), out.data(), 1);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

nlohmann::json to_json(const GgufValue& v) {
  if (v.type == GgufType::Array) {
    auto out = nlohmann::json::array();
    for (const auto& e : v.as_array()) out.push_back(to_json(e));
    return out;
  }
  if (v.type == GgufType::String) return v.as_string();
  if (v.type == GgufType::Bool) return v.as_bool();
  if (v.is_float()) return v.as_float();
  if (std::holds_alternative<std::uint64_t>(v.value)) return v.as_uint();
  return v.as_int();
}

void check_types_file(const std::filesystem::path& path, std::uint32_t version) {
  GgufFile file(path);
  EXPECT_EQ(file.version(), version);
  EXPECT_EQ(file.alignment(), 32u);
  auto expected_meta = nlohmann::json::parse(dew::test::read_text(gguf_fixtures() / "metadata.json"));
  ASSERT_EQ(file.metadata().size(), expected_meta.size());
  for (std::size_t i = 0; i < expected_meta.size(); ++i) {
    const auto& [key, value] = file.metadata()[i];
    SCOPED_TRACE(key);
    EXPECT_EQ(key, expected_meta[i][0].get<std::string>());
    EXPECT_EQ(value.type_name(), expected_meta[i][1].get<std::string>());
    EXPECT_EQ(value.key, key);
    EXPECT_EQ(to_json(value), expected_meta[i][2]);
  }
  EXPECT_EQ(file.at("general.architecture").as_string(), "llama");
  EXPECT_EQ(file.at("test.array_strings").as_strings(), (std::vector<std::string>{"<s>", "</s>", "a b", ""}));
  EXPECT_EQ(file.at("test.array_int32").as_ints(), (std::vector<std::int64_t>{1, -2, 3}));
  EXPECT_EQ(file.at("test.float32").as_float(), static_cast<double>(0.1f));

  Expected expected;
  const std::vector<std::string> names = {"f32",  "f16",  "bf16", "q4_0", "q4_1", "q5_0", "q5_1",
                                          "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"};
  ASSERT_EQ(file.tensors().size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto& info = file.tensors()[i];
    SCOPED_TRACE(info.name);
    EXPECT_EQ(info.name, names[i]);
    std::string type_name = ggml_type_name(info.type);
    for (auto& c : type_name) c = static_cast<char>(std::tolower(c));
    EXPECT_EQ(type_name, info.name);
    const std::int64_t cols = ggml_block_size(info.type) == 256 ? 256 : 64;
    EXPECT_EQ(info.dims, (std::vector<std::int64_t>{cols, 4}));
    EXPECT_EQ(info.offset % 32, 0u);
    auto values = dequantized(file, info);
    EXPECT_TRUE(same_bits(values, expected.values(info.name))) << "dequantized values differ from gguf-py's";
    // Row by row gives the same.
    std::vector<float> row(static_cast<std::size_t>(cols));
    const auto row_bytes = cols / ggml_block_size(info.type) * ggml_block_bytes(info.type);
    dequantize_row(info.type, file.data(info).data() + 2 * row_bytes, cols, row.data());
    EXPECT_TRUE(std::equal(row.begin(), row.end(), values.begin() + 2 * cols));
  }
}

TEST(GgufFile, ReadsEveryTypeAndValueOfVersion3) { check_types_file(gguf_fixtures() / "types_v3.gguf", 3); }
TEST(GgufFile, ReadsVersion2) { check_types_file(gguf_fixtures() / "types_v2.gguf", 2); }

TEST(GgufQuants, QuantizeMatchesGgufPyBitForBit) {
  GgufFile file(gguf_fixtures() / "types_v3.gguf");
  Expected expected;
  for (const char* name : {"f32", "f16", "bf16", "q8_0"}) {
    SCOPED_TRACE(name);
    const auto& info = file.tensor(name);
    auto source = expected.values(std::string(name) + ".source");
    std::vector<std::uint8_t> bytes(info.bytes);
    quantize_row(info.type, source.data(), static_cast<std::int64_t>(source.size()), bytes.data());
    auto want = file.data(info);
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), want.begin(), want.end()));
  }
}

TEST(GgufQuants, HalfConversionRoundTripsEveryHalf) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f = half_to_float(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), h) << h;
  }
  EXPECT_EQ(float_to_half(65519.0f), 0x7bffu);  // rounds down to 65504
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00u);  // the tie rounds to even: infinity
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0u);        // a tie with zero
  EXPECT_EQ(float_to_half(std::ldexp(1.5f, -25)), 1u);        // above the tie
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 2u);        // 1.5 units: tie to even (2)
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00u);  // tie to even below
  EXPECT_EQ(float_to_half(-2.0f), 0xc000u);
}

TEST(GgufQuants, RefusesTypesItCannotConvert) {
  std::vector<std::uint8_t> block(292);
  std::vector<float> out(256);
  try {
    dequantize_row(GgmlType::IQ2_XXS, block.data(), 256, out.data());
    FAIL();
  } catch (const dew::Error& e) {
    EXPECT_NE(std::string(e.what()).find("IQ2_XXS"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dequantize_row(GgmlType::Q4_K, block.data(), 100, out.data()), dew::Error);  // not whole blocks
  EXPECT_THROW(quantize_row(GgmlType::Q4_K, out.data(), 256, block.data()), dew::Error);
}

// Dequantization speed: bench/input_paths_bench's gguf_dequantize case.

// ----- bad input: a small GGUF built by hand, then broken in one place at a time -----

class Bytes {
 public:
  template <class T>
  Bytes& put(T v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    data.insert(data.end(), p, p + sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<std::uint64_t>(s.size());
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& pad_to(std::size_t alignment) {
    while (data.size() % alignment) data.push_back(0);
    return *this;
  }
  std::vector<std::uint8_t> data;
};

struct TensorSpec {
  std::string name;
  std::vector<std::uint64_t> dims;
  std::uint32_t type;
  std::uint64_t offset;
};

// Magic, version, counts, one string key, the tensors' infos, padding, `data_bytes` zero bytes.
std::vector<std::uint8_t> build(const std::vector<TensorSpec>& tensors, std::size_t data_bytes, std::uint32_t version = 3,
                                std::uint64_t claimed_tensors = ~0ull, std::uint64_t claimed_kv = ~0ull) {
  Bytes b;
  b.put<std::uint32_t>(0x46554747).put<std::uint32_t>(version);
  b.put<std::uint64_t>(claimed_tensors != ~0ull ? claimed_tensors : tensors.size());
  b.put<std::uint64_t>(claimed_kv != ~0ull ? claimed_kv : 1);
  b.str("general.architecture").put<std::uint32_t>(8).str("llama");
  for (const auto& t : tensors) {
    b.str(t.name).put<std::uint32_t>(static_cast<std::uint32_t>(t.dims.size()));
    for (auto d : t.dims) b.put<std::uint64_t>(d);
    b.put<std::uint32_t>(t.type).put<std::uint64_t>(t.offset);
  }
  b.pad_to(32);
  b.data.resize(b.data.size() + data_bytes);
  return b.data;
}

void expect_error(std::vector<std::uint8_t> bytes, const std::vector<std::string>& fragments) {
  try {
    GgufFile file(std::move(bytes), "bad.gguf");
    FAIL() << "accepted";
  } catch (const dew::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("bad.gguf"), std::string::npos) << message;
    for (const auto& f : fragments) EXPECT_NE(message.find(f), std::string::npos) << "'" << f << "' not in: " << message;
  }
}

TEST(GgufFileErrors, AWellFormedFileOpens) {
  GgufFile file(build({{"a", {64, 2}, 0, 0}, {"b", {32}, 8, 512}}, 512 + 34), "ok.gguf");
  EXPECT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.tensor("b").bytes, 34u);
  EXPECT_EQ(file.data(file.tensor("a")).size(), 512u);
}

TEST(GgufFileErrors, WrongMagic) {
  auto bytes = build({}, 0);
  std::memcpy(bytes.data(), "GGML", 4);
  expect_error(bytes, {"not a GGUF file", "GGML"});
}

TEST(GgufFileErrors, Version1IsRefusedByName) { expect_error(build({}, 0, 1), {"version 1", "not supported"}); }
TEST(GgufFileErrors, UnknownVersion) { expect_error(build({}, 0, 4), {"version 4"}); }

TEST(GgufFileErrors, TruncatedFile) {
  auto bytes = build({{"a", {64}, 0, 0}}, 256);
  auto whole = bytes;
  for (std::size_t cut : {std::size_t{2}, std::size_t{10}, std::size_t{30}, std::size_t{60}, whole.size() - 1}) {
    SCOPED_TRACE(cut);
    std::vector<std::uint8_t> part(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_THROW(GgufFile(part, "bad.gguf"), dew::Error);
  }
  std::vector<std::uint8_t> part(whole.begin(), whole.end() - 1);
  expect_error(part, {"tensor 'a'", "end past", "truncated"});
}

TEST(GgufFileErrors, CountsThatExceedTheFile) {
  expect_error(build({}, 0, 3, 1ull << 40), {"tensor count", "1099511627776"});
  expect_error(build({}, 0, 3, 0, 1ull << 50), {"metadata count"});
}

TEST(GgufFileErrors, UnknownGgmlType) { expect_error(build({{"w", {32}, 99, 0}}, 64), {"tensor 'w'", "unknown ggml type 99"}); }

TEST(GgufFileErrors, DataOutsideTheFile) {
  expect_error(build({{"w", {64}, 0, 1024}}, 256), {"tensor 'w'", "1024", "end past"});
}

TEST(GgufFileErrors, MisalignedOffset) {
  expect_error(build({{"w", {8}, 0, 4}}, 64), {"tensor 'w'", "offset 4", "alignment 32"});
}

TEST(GgufFileErrors, DuplicateTensorNames) {
  expect_error(build({{"w", {8}, 0, 0}, {"w", {8}, 0, 32}}, 64), {"tensor 'w'", "appears twice"});
}

TEST(GgufFileErrors, OverlappingTensors) {
  expect_error(build({{"a", {64}, 0, 0}, {"b", {8}, 0, 32}}, 256), {"'a'", "'b'", "overlap"});
}

TEST(GgufFileErrors, RowsNotWholeBlocks) { expect_error(build({{"q", {48}, 2, 0}}, 64), {"tensor 'q'", "Q4_0", "48"}); }

TEST(GgufFileErrors, DuplicateKeysAndBadValueTypes) {
  Bytes b;
  b.put<std::uint32_t>(0x46554747).put<std::uint32_t>(3).put<std::uint64_t>(0).put<std::uint64_t>(2);
  b.str("k").put<std::uint32_t>(4).put<std::uint32_t>(1);
  b.str("k").put<std::uint32_t>(4).put<std::uint32_t>(2);
  expect_error(b.data, {"key 'k'", "twice"});

  Bytes c;
  c.put<std::uint32_t>(0x46554747).put<std::uint32_t>(3).put<std::uint64_t>(0).put<std::uint64_t>(1);
  c.str("odd").put<std::uint32_t>(13).put<std::uint32_t>(0);
  expect_error(c.data, {"key 'odd'", "unknown value type 13"});

  Bytes d;  // a string that claims more bytes than the file has
  d.put<std::uint32_t>(0x46554747).put<std::uint32_t>(3).put<std::uint64_t>(0).put<std::uint64_t>(1);
  d.str("s").put<std::uint32_t>(8).put<std::uint64_t>(1000000);
  expect_error(d.data, {"1000000", "truncated"});

  Bytes e;  // an array length beyond the file
  e.put<std::uint32_t>(0x46554747).put<std::uint32_t>(3).put<std::uint64_t>(0).put<std::uint64_t>(1);
  e.str("arr").put<std::uint32_t>(9).put<std::uint32_t>(8).put<std::uint64_t>(1ull << 60);
  expect_error(e.data, {"array 'arr'"});
}

TEST(GgufFileErrors, MissingKeysAndTensorsAndWrongTypes) {
  GgufFile file(build({{"a", {64}, 0, 0}}, 256), "ok.gguf");
  try {
    (void)file.at("llama.block_count");
    FAIL();
  } catch (const dew::Error& e) {
    EXPECT_NE(std::string(e.what()).find("ok.gguf' has no metadata key 'llama.block_count'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(file.find("nope"), nullptr);
  try {
    (void)file.tensor("b");
    FAIL();
  } catch (const dew::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tensor 'b'"), std::string::npos) << e.what();
  }
  try {
    (void)file.at("general.architecture").as_int();
    FAIL();
  } catch (const dew::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'general.architecture' is a string, expected an integer"), std::string::npos)
        << e.what();
  }
}

TEST(GgufValue, AccessorsConvertWhereSafe) {
  auto u = GgufValue::uint32(7);
  EXPECT_EQ(u.as_int(), 7);
  EXPECT_EQ(u.as_uint(), 7u);
  EXPECT_EQ(u.as_float(), 7.0);
  EXPECT_THROW((void)u.as_bool(), dew::Error);
  EXPECT_THROW((void)GgufValue::int32(-1).as_uint(), dew::Error);
  EXPECT_THROW((void)GgufValue::uint64(~0ull).as_int(), dew::Error);
  EXPECT_EQ(GgufValue::strings({"a", "b"}).type_name(), "array[string]");
  EXPECT_THROW((void)GgufValue::int32s({1}).as_strings(), dew::Error);
  EXPECT_THROW(GgufValue::array(GgufType::Int32, {GgufValue::string("x")}), dew::Error);
}

}  // namespace
}  // namespace dew::formats
