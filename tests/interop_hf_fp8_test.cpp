// fp8 block-scaled Hugging Face checkpoints (tools/reference/make_fp8_fixtures.py: the tiny llama with its
// decoder Linear weights quantized to float8_e4m3fn by torch in 16x16 and 128x128 blocks), and the refusal of
// every other quantization method by name.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "dew/core/config.h"
#include "dew/formats/safetensors.h"
#include "dew/inference/generate.h"
#include "dew/interop/hf_model.h"
#include "dew/nn/parameters.h"
#include "test_support.h"

namespace dew::interop {
namespace {
namespace fs = std::filesystem;
using test::error_of;

fs::path fp8_dir(std::int64_t block) { return test::fixtures() / "hf_fp8" / ("llama_b" + std::to_string(block)); }

std::vector<std::int32_t> to_ids(const at::Tensor& t) {
  auto longs = t.to(at::kLong).contiguous();
  return {longs.data_ptr<std::int64_t>(), longs.data_ptr<std::int64_t>() + longs.numel()};
}

class Fp8Checkpoint : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(Fp8Checkpoint, LoadsDequantizedAsTransformersComputesIt) {
  auto loaded = load_hf_model(fp8_dir(GetParam()));
  formats::SafetensorsFile io(fp8_dir(GetParam()) / "io.safetensors");
  at::NoGradGuard no_grad;
  // fp8 value * scale is one float32 product of exactly converted values in both, so the weights are equal bit for bit.
  auto q_proj = nn::parameter_map(*loaded.model).at("model.layers.0.self_attn.q_proj.weight");
  EXPECT_TRUE(at::equal(q_proj, io.load("q_proj0")));
  auto logits = loaded.model->forward({io.load("ids")});
  // The float32 forward of the same weights: the 1e-5 bound of the family tests (interop_hf_families_test.cpp).
  EXPECT_LT((logits - io.load("logits")).abs().max().item<double>(), 1e-5);
  inference::Sampling greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = io.load("greedy0").numel();
  auto out = inference::generate(loaded.model, {to_ids(io.load("prompt0"))}, greedy);
  EXPECT_EQ(out.tokens.at(0), to_ids(io.load("greedy0")));
}

INSTANTIATE_TEST_SUITE_P(Blocks, Fp8Checkpoint, ::testing::Values(16, 128));

// A copy of the 16x16 fixture with its config.json and tensors changed by `edit_config` and `edit_tensors`.
struct Edited {
  test::TempDir dir;
  Edited(const std::function<void(config::Json&)>& edit_config,
         const std::function<void(std::map<std::string, at::Tensor>&)>& edit_tensors = {}) {
    auto json = config::parse_json_file(fp8_dir(16) / "config.json");
    edit_config(json);
    test::write_text(dir / "config.json", json.dump(2));
    formats::SafetensorsFile file(fp8_dir(16) / "model.safetensors");
    std::map<std::string, at::Tensor> tensors;
    for (const auto& name : file.names()) tensors[name] = file.load(name);
    if (edit_tensors) edit_tensors(tensors);
    formats::save_safetensors(dir / "model.safetensors", tensors);
  }
  std::string error() const { return error_of([&] { load_hf_model(dir.path()); }); }
};

void expect_parts(const std::string& message, std::initializer_list<std::string> parts) {
  for (const auto& part : parts) EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
}

const std::string kQ = "model.layers.1.mlp.gate_proj.weight";  // [48, 32]: 3 x 2 blocks of 16

TEST(Fp8Checkpoint, BadCheckpointsAreRefusedByName) {
  auto keep = [](config::Json&) {};
  // The block size is read: the same tensors described as 128x128 blocks have scales of the wrong shape.
  expect_parts(Edited([](auto& j) { j["quantization_config"]["weight_block_size"] = {128, 128}; }).error(),
               {"block scales have shape", "128x128 blocks needs [1, "});
  expect_parts(Edited(keep, [](auto& t) { t[kQ + "_scale_inv"] = t[kQ + "_scale_inv"].narrow(0, 0, 2).contiguous(); }).error(),
               {kQ, "[2, 2]", "[3, 2]"});
  expect_parts(Edited(keep, [](auto& t) { t.erase(kQ + "_scale_inv"); }).error(), {kQ, "_scale_inv", "no '"});
  expect_parts(Edited(keep, [](auto& t) { t[kQ + "_scale_inv"] = t[kQ + "_scale_inv"].to(at::kInt); }).error(),
               {kQ + "_scale_inv", "I32"});
  expect_parts(Edited(keep, [](auto& t) { t[kQ] = t[kQ].to(at::kFloat).to(at::kFloat8_e5m2); }).error(), {kQ, "F8_E5M2", "F8_E4M3"});
  expect_parts(Edited([](auto& j) { j.erase("quantization_config"); }).error(), {"F8_E4M3", "no quantization_config"});
  expect_parts(Edited([](auto& j) { j["quantization_config"]["fmt"] = "e5m2"; }).error(), {"quantization_config.fmt", "e5m2"});
  expect_parts(Edited([](auto& j) { j["quantization_config"]["weight_block_size"] = {16, 32}; }).error(),
               {"weight_block_size", "[16,32]", "square"});
  expect_parts(Edited([](auto& j) { j["quantization_config"].erase("weight_block_size"); }).error(), {"weight_block_size"});
  expect_parts(Edited([](auto& j) { j["quantization_config"]["activation_scheme"] = "static"; }).error(),
               {"activation_scheme", "static"});
  expect_parts(Edited([](auto& j) { j["quantization_config"]["scale_fmt"] = "e4m3"; }).error(), {"scale_fmt", "e4m3"});
}

TEST(Fp8Checkpoint, Ue8m0ScalesStoredAsE8M0Load) {
  // DeepSeek-V3.2's scale_fmt: power-of-two scales, stored F8_E8M0. Rounding the fixture's scales up to powers
  // of two changes the weights, so the reference is the same dequantization done here in float32.
  Edited edited([](auto& j) { j["quantization_config"]["scale_fmt"] = "ue8m0"; }, [](auto& t) {
    auto scale = t[kQ + "_scale_inv"];
    t[kQ + "_scale_inv"] = at::exp2(at::ceil(at::log2(scale))).to(at::kFloat8_e8m0fnu);
  });
  auto loaded = load_hf_model(edited.dir.path());
  formats::SafetensorsFile file(edited.dir / "model.safetensors");
  auto scale = file.load(kQ + "_scale_inv", at::kFloat);
  auto want = file.load(kQ, at::kFloat) * scale.repeat_interleave(16, 0).repeat_interleave(16, 1);
  EXPECT_TRUE(at::equal(nn::parameter_map(*loaded.model).at(kQ), want));
}

TEST(Fp8Checkpoint, ExportWritesPlainWeights) {
  auto loaded = load_hf_model(fp8_dir(16));
  test::TempDir dir;
  save_hf_model(loaded.model, loaded.model_type, dir / "out");
  auto json = config::parse_json_file(dir / "out" / "config.json");
  EXPECT_FALSE(json.contains("quantization_config"));
  formats::SafetensorsFile file(dir / "out" / "model.safetensors");
  EXPECT_EQ(file.entry(kQ).dtype, "F32");
  EXPECT_FALSE(file.contains(kQ + "_scale_inv"));
  auto back = load_hf_model(dir / "out");
  formats::SafetensorsFile io(fp8_dir(16) / "io.safetensors");
  at::NoGradGuard no_grad;
  EXPECT_TRUE(at::equal(back.model->forward({io.load("ids")}), loaded.model->forward({io.load("ids")})));
}

TEST(HfQuantization, OtherMethodsAreRefusedByNameWithWhatToDo) {
  for (const char* method : {"gptq", "awq", "bitsandbytes", "compressed-tensors", "aqlm", "hqq", "eetq", "fbgemm_fp8", "newq"}) {
    auto message = Edited([&](auto& j) { j["quantization_config"] = {{"quant_method", method}, {"bits", 4}}; }).error();
    expect_parts(message, {"config.json", "quantization_config.quant_method", std::string("'") + method + "'",
                           "unquantized checkpoint", "GGUF"});
  }
  expect_parts(Edited([](auto& j) { j["quantization_config"] = {{"bits", 4}}; }).error(), {"no quant_method"});
}

}  // namespace
}  // namespace dew::interop
