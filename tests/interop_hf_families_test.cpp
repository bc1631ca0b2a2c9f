// Hugging Face decoder families against transformers itself (fixtures from
// tools/reference/make_hf_family_fixtures.py: tiny random models with each family's own features on):
// logits of a plain batch, of a left-padded batch at its real positions, and greedy continuations.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "dew/formats/safetensors.h"
#include "dew/inference/generate.h"
#include "dew/interop/hf_model.h"
#include "dew/objectives/router_losses.h"
#include "test_support.h"

namespace {

std::filesystem::path family_dir(const std::string& family) { return dew::test::fixtures() / "hf" / family; }

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

std::vector<std::int32_t> to_ids(const at::Tensor& t) {
  auto longs = t.to(at::kLong).contiguous();
  return {longs.data_ptr<std::int64_t>(), longs.data_ptr<std::int64_t>() + longs.numel()};
}

class HfFamily : public ::testing::TestWithParam<std::string> {};
class HfMoeFamily : public ::testing::TestWithParam<std::string> {};

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
                                           "gpt_neox", "phi3", "olmo2", "granite", "mixtral", "qwen2_moe", "qwen3_moe"));

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
  auto mixtral = config_of("mixtral");
  EXPECT_EQ(mixtral.num_experts, 4);
  EXPECT_EQ(mixtral.experts_per_token, 2);
  EXPECT_EQ(mixtral.resolved_expert_features(), 24);
  EXPECT_TRUE(mixtral.norm_topk_prob && mixtral.is_moe_layer(0) && mixtral.is_moe_layer(1));
  EXPECT_EQ(mixtral.window_of_layer(1), 5);
  auto qwen2_moe = config_of("qwen2_moe");
  EXPECT_EQ(qwen2_moe.shared_expert_features, 20);
  EXPECT_EQ(qwen2_moe.resolved_expert_features(), 16);
  EXPECT_FALSE(qwen2_moe.norm_topk_prob);
  EXPECT_TRUE(qwen2_moe.is_moe_layer(0) && !qwen2_moe.is_moe_layer(1) && qwen2_moe.is_moe_layer(2));  // mlp_only_layers [1]
  EXPECT_TRUE(qwen2_moe.attention_bias && !qwen2_moe.attention_output_bias);
  auto qwen3_moe = config_of("qwen3_moe");
  EXPECT_TRUE(qwen3_moe.norm_topk_prob && qwen3_moe.qk_norm);
  EXPECT_TRUE(!qwen3_moe.is_moe_layer(0) && qwen3_moe.is_moe_layer(1) && !qwen3_moe.is_moe_layer(2) && qwen3_moe.is_moe_layer(3));
}

// transformers' router load-balancing loss (load_balancing_loss_func with the padding masked out) equals
// dew's router_losses on the routers' decisions for the same left-padded batch.
TEST_P(HfMoeFamily, RouterAuxLossMatchesTransformers) {
  auto loaded = dew::interop::load_hf_model(family_dir(GetParam()));
  dew::formats::SafetensorsFile io(family_dir(GetParam()) / "io.safetensors");
  at::NoGradGuard no_grad;
  auto mask = io.load("padded_mask");
  loaded.model->forward({io.load("padded_ids"), io.load("padded_positions"), mask});
  auto records = loaded.model->take_router_records();
  std::int64_t moe_layers = 0;
  for (std::int64_t i = 0; i < loaded.model->config().num_layers; ++i) moe_layers += loaded.model->config().is_moe_layer(i);
  ASSERT_EQ(static_cast<std::int64_t>(records.size()), moe_layers);
  auto terms = dew::objectives::router_losses(records, loaded.model->config().num_experts, mask);
  // A sum of ~24 * layers float32 products of probabilities, each within a few ulp of transformers': 1e-6.
  EXPECT_NEAR(terms.aux.item<double>(), io.load("padded_aux_loss").item<double>(), 1e-6);
  EXPECT_NEAR(terms.load.sum().item<double>(), 1.0, 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Families, HfMoeFamily, ::testing::Values("mixtral", "qwen2_moe", "qwen3_moe"));

}  // namespace
