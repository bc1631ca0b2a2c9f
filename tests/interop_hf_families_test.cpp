// Hugging Face decoder families against transformers itself (fixtures from
// tools/reference/make_hf_family_fixtures.py: tiny random models with each family's own features on):
// logits of a plain batch, of a left-padded batch at its real positions, and greedy continuations.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "dew/formats/safetensors.h"
#include "dew/inference/generate.h"
#include "dew/interop/hf_model.h"
#include "test_support.h"

namespace {

std::filesystem::path family_dir(const std::string& family) { return dew::test::fixtures() / "hf" / family; }

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

std::vector<std::int32_t> to_ids(const at::Tensor& t) {
  auto longs = t.to(at::kLong).contiguous();
  return {longs.data_ptr<std::int64_t>(), longs.data_ptr<std::int64_t>() + longs.numel()};
}

class HfFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFamily, LogitsMatchTransformers) {
  auto loaded = dew::interop::load_hf_model(family_dir(GetParam()));
  EXPECT_EQ(loaded.model_type, GetParam());
  dew::formats::SafetensorsFile io(family_dir(GetParam()) / "io.safetensors");
  at::NoGradGuard no_grad;
  auto logits = loaded.model->forward({io.load("ids")});
  EXPECT_LT(max_abs_diff(logits, io.load("logits")), 1e-5);
}

TEST_P(HfFamily, LeftPaddedBatchMatchesAtRealPositions) {
  auto loaded = dew::interop::load_hf_model(family_dir(GetParam()));
  dew::formats::SafetensorsFile io(family_dir(GetParam()) / "io.safetensors");
  at::NoGradGuard no_grad;
  auto mask = io.load("padded_mask");
  auto logits = loaded.model->forward({io.load("padded_ids"), io.load("padded_positions"), mask});
  auto real = mask.to(at::kBool);
  auto expected = io.load("padded_logits");
  EXPECT_LT(max_abs_diff(logits.index({real}), expected.index({real})), 1e-5);
}

TEST_P(HfFamily, GreedyContinuationMatchesTransformers) {
  auto loaded = dew::interop::load_hf_model(family_dir(GetParam()));
  dew::formats::SafetensorsFile io(family_dir(GetParam()) / "io.safetensors");
  dew::inference::Sampling greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = io.load("greedy0").numel();
  // Both prompts in one batch (dew left-pads the shorter); transformers generated each alone.
  auto out = dew::inference::generate(loaded.model, {to_ids(io.load("prompt0")), to_ids(io.load("prompt1"))}, greedy);
  ASSERT_EQ(out.rows(), 2);
  EXPECT_EQ(out.tokens[0], to_ids(io.load("greedy0")));
  EXPECT_EQ(out.tokens[1], to_ids(io.load("greedy1")));
}

INSTANTIATE_TEST_SUITE_P(Families, HfFamily,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "gpt2",
                                           "gpt_neox", "phi3", "olmo2", "granite"));

TEST(HfFamilies, FeaturesTranslateAsExpected) {
  auto config_of = [](const std::string& family) { return dew::interop::load_hf_model(family_dir(family)).model->config(); };
  auto llama = config_of("llama");
  EXPECT_EQ(llama.rope_scaling.type, "llama3");
  EXPECT_TRUE(llama.attention_bias && llama.attention_output_bias && llama.mlp_bias);
  EXPECT_FALSE(llama.tie_embeddings);
  auto mistral = config_of("mistral");
  for (std::int64_t i = 0; i < mistral.num_layers; ++i) EXPECT_EQ(mistral.window_of_layer(i), 4);
  auto qwen2 = config_of("qwen2");
  EXPECT_TRUE(qwen2.attention_bias);
  EXPECT_FALSE(qwen2.attention_output_bias);
  EXPECT_EQ(qwen2.window_of_layer(1), 0);
  EXPECT_EQ(qwen2.window_of_layer(2), 5);
  auto gemma2 = config_of("gemma2");
  EXPECT_TRUE(gemma2.sandwich_norms);
  EXPECT_EQ(gemma2.attn_logit_softcap, 2.0);
  EXPECT_EQ(gemma2.final_logit_softcap, 3.0);
  EXPECT_EQ(gemma2.window_of_layer(0), 4);
  EXPECT_EQ(gemma2.window_of_layer(1), 0);
  auto gemma3 = config_of("gemma3_text");
  EXPECT_EQ(gemma3.kind_rope_theta_of_layer(0), 100.0);
  EXPECT_EQ(gemma3.kind_rope_theta_of_layer(2), 0.0);
  EXPECT_EQ(gemma3.rope_scaling.type, "linear");
  EXPECT_EQ(gemma3.norm_weight_offset, 1.0);
  auto gpt2 = config_of("gpt2");
  EXPECT_EQ(gpt2.norm, "layernorm");
  EXPECT_EQ(gpt2.positions, "learned");
  EXPECT_EQ(gpt2.mlp, "gelu");
  EXPECT_TRUE(gpt2.tie_embeddings && gpt2.attention_bias && gpt2.attention_output_bias && gpt2.mlp_bias);
  auto neox = config_of("gpt_neox");
  EXPECT_TRUE(neox.parallel_residual);
  EXPECT_EQ(neox.rotary_dim, 4);  // partial_rotary_factor 0.5 of 8-wide heads
  EXPECT_EQ(neox.mlp, "gelu_erf");
  auto phi3 = config_of("phi3");
  EXPECT_EQ(phi3.rotary_dim, 4);
  for (std::int64_t i = 0; i < phi3.num_layers; ++i) EXPECT_EQ(phi3.window_of_layer(i), 5);
  auto olmo2 = config_of("olmo2");
  EXPECT_FALSE(olmo2.pre_norms || olmo2.qk_norm_per_head);
  EXPECT_TRUE(olmo2.sandwich_norms && olmo2.qk_norm);
  auto granite = config_of("granite");
  EXPECT_EQ(granite.embedding_scale, 3.0);
  EXPECT_EQ(granite.residual_multiplier, 0.5);
  EXPECT_EQ(granite.attention_scale, 0.2);
  EXPECT_EQ(granite.logits_scaling, 2.5);
}

}  // namespace
