// GGUF with tensors: gguf_tensor against gguf-py's dequantized values, and GgufWriter read back by dew and
// (through a committed file that tools/reference/make_gguf_fixtures.py checks) by gguf-py.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "dew/core/error.h"
#include "dew/formats/gguf.h"
#include "dew/formats/gguf_quants.h"
#include "dew/formats/gguf_writer.h"
#include "dew/formats/safetensors.h"
#include "test_support.h"

namespace dew::formats {
namespace {

namespace fs = std::filesystem;

fs::path gguf_fixtures() { return dew::test::fixtures() / "gguf"; }

TEST(GgufTensor, DequantizesInPyTorchOrder) {
  GgufFile file(gguf_fixtures() / "types_v3.gguf");
  SafetensorsFile expected(gguf_fixtures() / "expected.safetensors");
  for (const auto& info : file.tensors()) {
    SCOPED_TRACE(info.name);
    auto t = gguf_tensor(file, info.name);
    auto want = expected.view(info.name);
    EXPECT_EQ(t.sizes(), want.sizes());  // [4, 64] or [4, 256]: GGUF's dims reversed
    EXPECT_EQ(t.sizes(), at::IntArrayRef(gguf_torch_shape(info)));
    EXPECT_TRUE(at::equal(t, want));
  }
  auto half = gguf_tensor(file, "q4_k", at::kHalf);
  EXPECT_EQ(half.scalar_type(), at::kHalf);
  EXPECT_TRUE(at::equal(half, expected.view("q4_k").to(at::kHalf)));
  try {
    gguf_tensor(file, "missing");
    FAIL();
  } catch (const dew::Error& e) {
    EXPECT_NE(std::string(e.what()).find("types_v3.gguf' has no tensor 'missing'"), std::string::npos) << e.what();
  }
}

// The content of tests/fixtures/gguf/dew_written.gguf; make_gguf_fixtures.py repeats these formulas.
GgufWriter committed_writer() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_uint32("general.alignment", 64);
  w.set_uint32("test.count", 7);
  w.set_float32("test.scale", 0.25f);
  w.set_bool("test.flag", true);
  w.set_strings("test.tokens", {"<s>", "</s>", "hello"});
  w.set_int32s("test.ids", {3, -1, 2});
  w.set_float32s("test.scores", {0.5f, -0.25f});
  auto values = (at::arange(3 * 64, at::kLong).mul(37).remainder(101).sub(50).to(at::kFloat) / 16).reshape({3, 64});
  w.add_tensor("w_f32", values, GgmlType::F32);
  w.add_tensor("w_f16", values, GgmlType::F16);
  w.add_tensor("w_q8_0", values, GgmlType::Q8_0);
  return w;
}

TEST(GgufWriter, MatchesCommittedFile) {
  dew::test::TempDir dir;
  auto writer = committed_writer();
  writer.write(dir / "out.gguf");
  const auto committed = gguf_fixtures() / "dew_written.gguf";
  if (const char* update = std::getenv("DEW_UPDATE_FIXTURES"); update && *update == '1') {
    fs::copy_file(dir / "out.gguf", committed, fs::copy_options::overwrite_existing);
  }
  EXPECT_EQ(dew::test::read_text(dir / "out.gguf"), dew::test::read_text(committed))
      << "dew's GGUF output changed: if on purpose, rerun with DEW_UPDATE_FIXTURES=1 and then "
         "tools/reference/make_gguf_fixtures.py, which checks gguf-py reads it";
}

TEST(GgufWriter, ReadsBackThroughDewsReader) {
  dew::test::TempDir dir;
  committed_writer().write(dir / "out.gguf");
  GgufFile file(dir / "out.gguf");
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 64u);
  EXPECT_EQ(file.metadata().size(), 8u);
  EXPECT_EQ(file.metadata()[2].first, "test.count");
  EXPECT_EQ(file.at("test.count").type, GgufType::UInt32);
  EXPECT_EQ(file.at("test.count").as_uint(), 7u);
  EXPECT_EQ(file.at("test.scale").as_float(), 0.25);
  EXPECT_TRUE(file.at("test.flag").as_bool());
  EXPECT_EQ(file.at("test.tokens").as_strings(), (std::vector<std::string>{"<s>", "</s>", "hello"}));
  EXPECT_EQ(file.at("test.ids").as_ints(), (std::vector<std::int64_t>{3, -1, 2}));
  EXPECT_EQ(file.at("test.scores").as_floats(), (std::vector<double>{0.5, -0.25}));
  auto values = (at::arange(3 * 64, at::kLong).mul(37).remainder(101).sub(50).to(at::kFloat) / 16).reshape({3, 64});
  for (const auto& info : file.tensors()) {
    EXPECT_EQ(info.offset % 64, 0u);
    EXPECT_EQ(info.dims, (std::vector<std::int64_t>{64, 3}));
  }
  EXPECT_TRUE(at::equal(gguf_tensor(file, "w_f32"), values));
  EXPECT_TRUE(at::equal(gguf_tensor(file, "w_f16"), values.to(at::kHalf).to(at::kFloat)));  // exact in half
  auto q8 = gguf_tensor(file, "w_q8_0");
  EXPECT_LE((q8 - values).abs().max().item<float>(), 3.125f / 127);  // within a quantization step
  // Q8_0 read back equals quantize-then-dequantize (what gguf-py gives: QuantizeMatchesGgufPyBitForBit).
  std::vector<std::uint8_t> blocks(6 * 34);
  quantize_row(GgmlType::Q8_0, values.contiguous().data_ptr<float>(), 192, blocks.data());
  auto manual = at::empty({3, 64});
  dequantize_row(GgmlType::Q8_0, blocks.data(), 192, manual.data_ptr<float>());
  EXPECT_TRUE(at::equal(q8, manual));
}

TEST(GgufWriter, RefusesWhatItCannotWrite) {
  GgufWriter w;
  EXPECT_THROW(w.add_tensor("x", at::zeros({2, 33}), GgmlType::Q8_0), dew::Error);  // rows not whole blocks
  EXPECT_THROW(w.add_tensor("x", at::zeros({32}), GgmlType::Q4_K), dew::Error);
  EXPECT_THROW(w.add_tensor("x", at::zeros({1, 1, 1, 1, 1}), GgmlType::F32), dew::Error);
  w.add_tensor("x", at::zeros({32}), GgmlType::F16);
  EXPECT_THROW(w.add_tensor("x", at::zeros({32}), GgmlType::F16), dew::Error);
  EXPECT_THROW(w.set_float32("general.alignment", 3), dew::Error);
  EXPECT_THROW(w.set_uint32("general.alignment", 24), dew::Error);
  w.set_uint32("k", 1);
  w.set_uint32("j", 2);
  w.set_string("k", "again");  // replaced in place
  EXPECT_EQ(w.metadata().front().first, "k");
  EXPECT_EQ(w.metadata().front().second.as_string(), "again");
}

}  // namespace
}  // namespace dew::formats
