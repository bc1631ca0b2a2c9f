// Phi-3's longrope rotary scaling against transformers 5.24 (tools/reference/make_hf_family_fixtures.py,
// phi3_longrope: original_max_position_embeddings 8, max_position_embeddings 64, so a 12-token row rotates
// with long_factor and a 6-token one with short_factor, and cos / sin carry sqrt(1 + ln 8 / ln 8)).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>

#include "dew/core/config.h"
#include "dew/formats/safetensors.h"
#include "dew/inference/engine.h"
#include "dew/inference/generate.h"
#include "dew/interop/hf_config.h"
#include "dew/interop/hf_model.h"
#include "test_support.h"

namespace dew::interop {
namespace {
namespace fs = std::filesystem;

fs::path longrope_dir() { return test::fixtures() / "hf" / "phi3_longrope"; }
double max_abs_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

std::vector<std::int32_t> to_ids(const at::Tensor& t) {
  auto longs = t.to(at::kLong).contiguous();
  return {longs.data_ptr<std::int64_t>(), longs.data_ptr<std::int64_t>() + longs.numel()};
}

TEST(Phi3Longrope, ConfigReadsTheFactorsAndExportsThemBack) {
  auto hf = config::parse_json_file(longrope_dir() / "config.json");
  auto c = config_from_hf(hf, "config.json");
  EXPECT_EQ(c.rope_scaling.type, "longrope");
  EXPECT_EQ(c.rope_scaling.short_factor, (std::vector<double>{1.0, 1.5}));
  EXPECT_EQ(c.rope_scaling.long_factor, (std::vector<double>{2.0, 7.5}));
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8);
  EXPECT_EQ(c.rope_scaling.factor, 8.0);  // max_position_embeddings / original_max_position_embeddings
  EXPECT_DOUBLE_EQ(c.rope_scaling.attention_factor, std::sqrt(2.0));
  auto out = config_to_hf(c, "phi3");
  EXPECT_EQ(out["rope_scaling"]["rope_type"], "longrope");
  EXPECT_EQ(out["original_max_position_embeddings"], 8);
  auto back = config_from_hf(out, "exported config.json");
  EXPECT_EQ(config::to_json(back.rope_scaling), config::to_json(c.rope_scaling));
  // Older configs spell it su, with the boundary at the top level only.
  hf["rope_parameters"]["rope_type"] = "su";
  hf["rope_parameters"].erase("original_max_position_embeddings");
  EXPECT_EQ(config::to_json(config_from_hf(hf, "su").rope_scaling), config::to_json(c.rope_scaling));
}

TEST(Phi3Longrope, BadFactorsAreRefusedByName) {
  auto hf = config::parse_json_file(longrope_dir() / "config.json");
  auto wrong = hf;
  wrong["rope_parameters"]["long_factor"] = {2.0, 7.5, 3.0};
  auto message = test::error_of([&] { config_from_hf(wrong, "config.json"); });
  EXPECT_NE(message.find("long_factor has 3 values"), std::string::npos) << message;
  wrong = hf;
  wrong["rope_parameters"].erase("short_factor");
  message = test::error_of([&] { config_from_hf(wrong, "config.json"); });
  EXPECT_NE(message.find("rope_parameters.short_factor"), std::string::npos) << message;
  // Only Phi-3 generates with longrope the way dew does (its cache dropped at the boundary).
  auto llama = config::parse_json_file(test::fixtures() / "hf" / "llama" / "config.json");
  llama["rope_parameters"] = hf["rope_parameters"];
  llama["rope_parameters"].erase("partial_rotary_factor");
  message = test::error_of([&] { config_from_hf(llama, "config.json"); });
  EXPECT_NE(message.find("longrope"), std::string::npos) << message;
}

TEST(Phi3Longrope, LogitsMatchTransformersBelowAndAboveTheBoundary) {
  auto loaded = load_hf_model(longrope_dir());
  formats::SafetensorsFile io(longrope_dir() / "io.safetensors");
  at::NoGradGuard no_grad;
  // The float32 forward of the same weights: the 1e-5 bound of the other families (interop_hf_families_test.cpp).
  auto long_logits = loaded.model->forward({io.load("ids")});
  EXPECT_LT(max_abs_diff(long_logits, io.load("logits")), 1e-5);
  auto short_logits = loaded.model->forward({io.load("short_ids")});
  EXPECT_LT(max_abs_diff(short_logits, io.load("short_logits")), 1e-5);
  // The same six tokens rotate differently inside the 12-token row: the factors really switch.
  EXPECT_GT(max_abs_diff(long_logits.narrow(1, 0, 6), short_logits), 1e-3);
  // A left-padded batch: each row by its own length (row 1 has 8 real tokens: short_factor).
  auto mask = io.load("padded_mask");
  auto padded = loaded.model->forward({io.load("padded_ids"), io.load("padded_positions"), mask});
  auto real = mask.to(at::kBool);
  EXPECT_LT(max_abs_diff(padded.index({real}), io.load("padded_logits").index({real})), 1e-5);
}

TEST(Phi3Longrope, GreedyAcrossTheBoundaryMatchesTransformers) {
  auto loaded = load_hf_model(longrope_dir());
  formats::SafetensorsFile io(longrope_dir() / "io.safetensors");
  inference::Sampling greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = io.load("greedy0").numel();
  // 5 + 8 and 3 + 8 tokens: both rows pass position 8, where the engine recomputes the row's cache with
  // long_factor as transformers' Phi-3 drops its cache.
  auto out = inference::generate(loaded.model, {to_ids(io.load("prompt0")), to_ids(io.load("prompt1"))}, greedy);
  EXPECT_EQ(out.tokens.at(0), to_ids(io.load("greedy0")));
  EXPECT_EQ(out.tokens.at(1), to_ids(io.load("greedy1")));
}

TEST(Phi3Longrope, ChunkedPrefillRotatesAsTheWholePrompt) {
  auto loaded = load_hf_model(longrope_dir());
  formats::SafetensorsFile io(longrope_dir() / "io.safetensors");
  // A 12-token prompt in chunks of 4: the first chunk alone is below the boundary but must rotate as the
  // whole (long) prompt does; its prompt scores are transformers' log-softmax of the 12-token logits.
  inference::Engine engine(loaded.model, {.max_batch = 1, .context = 0, .step_token_budget = 4, .prefix_cache = true});
  inference::EngineRequest request;
  auto ids = to_ids(io.load("ids")[0]);
  request.prompt = ids;
  request.sampling.temperature = 0;
  request.sampling.max_new_tokens = 1;
  request.prompt_logprobs = true;
  std::vector<inference::EngineToken> scores;
  engine.submit(request, [&](const inference::EngineEvent& e) {
    if (!e.prompt.empty()) scores = e.prompt;
    return true;
  });
  engine.run_until_idle();
  ASSERT_EQ(scores.size(), ids.size() - 1);
  auto want = at::log_softmax(io.load("logits")[0], -1);
  double worst = 0;
  for (std::size_t j = 0; j + 1 < ids.size(); ++j) {
    worst = std::max(worst, std::abs(scores[j].logprob - want[static_cast<std::int64_t>(j)][ids[j + 1]].item<double>()));
  }
  // Logits within 1e-5 move a log-softmax by at most twice that.
  EXPECT_LT(worst, 2e-5);
}

TEST(Phi3Longrope, ExportRoundTripKeepsTheLogits) {
  auto loaded = load_hf_model(longrope_dir());
  test::TempDir dir;
  save_hf_model(loaded.model, loaded.model_type, dir / "out");
  auto back = load_hf_model(dir / "out");
  formats::SafetensorsFile io(longrope_dir() / "io.safetensors");
  at::NoGradGuard no_grad;
  EXPECT_TRUE(at::equal(back.model->forward({io.load("ids")}), loaded.model->forward({io.load("ids")})));
}

}  // namespace
}  // namespace dew::interop
