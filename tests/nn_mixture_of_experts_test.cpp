// The mixture-of-experts layer (nn/mixture_of_experts.h) against a per-token loop written from its
// definition, its config checks, its parameter count, and the router losses (objectives/router_losses.h)
// on a case worked by hand. Against transformers itself: interop_hf_families_test.cpp (logits, greedy,
// aux loss) and interop_hf_family_lora_test.cpp (LoRA on the grouped experts).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <cmath>

#include "dew/nn/causal_transformer.h"
#include "dew/nn/lora.h"
#include "dew/nn/parameter_count.h"
#include "dew/objectives/router_losses.h"
#include "test_support.h"

namespace {

using dew::nn::CausalTransformerConfig;

CausalTransformerConfig moe_config() {
  CausalTransformerConfig c;
  c.vocab_size = 40, c.emb_features = 16, c.num_layers = 3, c.num_heads = 2, c.max_seq_len = 16;
  c.num_experts = 4, c.experts_per_token = 2, c.expert_features = 12;
  return c;
}

// Each token alone: softmax over all experts, its top k, each chosen expert's gated MLP by its own
// products, summed by the (renormalised) probabilities; the shared expert added with its sigmoid gate.
at::Tensor per_token_reference(dew::nn::MixtureOfExpertsImpl& moe, const at::Tensor& x, std::int64_t k, bool renormalise) {
  const auto rows = x.reshape({-1, x.size(-1)});
  const auto F = moe.experts->down_proj.size(2);
  std::vector<at::Tensor> out;
  for (std::int64_t t = 0; t < rows.size(0); ++t) {
    const auto token = rows[t];
    const auto probabilities = at::softmax(at::mv(moe.gate->weight, token), 0);
    auto [top, chosen] = at::topk(probabilities, k);
    if (renormalise) top = top / top.sum();
    auto y = at::zeros_like(token);
    for (std::int64_t j = 0; j < chosen.size(0); ++j) {
      const auto e = chosen[j].item<std::int64_t>();
      const auto h = at::mv(moe.experts->gate_up_proj[e], token);
      const auto act = at::silu(h.narrow(0, 0, F)) * h.narrow(0, F, F);
      y = y + top[j] * at::mv(moe.experts->down_proj[e], act);
    }
    if (!moe.shared_expert.is_empty()) {
      const auto& s = moe.shared_expert;
      const auto act = at::silu(at::mv(s->gate_proj->weight, token)) * at::mv(s->up_proj->weight, token);
      y = y + at::sigmoid(at::dot(moe.shared_expert_gate->weight[0], token)) * at::mv(s->down_proj->weight, act);
    }
    out.push_back(y);
  }
  return at::stack(out).view(x.sizes());
}

TEST(MixtureOfExperts, GroupedExpertsEqualAPerTokenLoopForwardAndBackward) {
  for (bool shared : {false, true}) {
    for (bool renormalise : {true, false}) {
      auto config = moe_config();
      config.norm_topk_prob = renormalise;
      config.shared_expert_features = shared ? 8 : 0;
      dew::nn::CausalTransformer model(config);
      model->init_parameters(3);
      auto* block = model->model->layers[0]->as<dew::nn::DecoderBlockImpl>();
      ASSERT_FALSE(block->moe.is_empty());
      auto& moe = *block->moe;
      {  // a router far from uniform, so no two probabilities are within rounding of each other
        at::NoGradGuard no_grad;
        moe.gate->weight.normal_(0, 1.0);
      }
      auto x = at::randn({2, 7, config.emb_features}, at::TensorOptions().dtype(at::kFloat));
      auto y = moe.forward(x);
      auto expected = per_token_reference(moe, x, config.experts_per_token, renormalise);
      // Float32 sums of 16 and 12 products of values of order 1: a few ulp.
      EXPECT_LT((y - expected).abs().max().item<double>(), 1e-5) << shared << renormalise;
      auto weights = at::randn_like(y);
      auto grads = torch::autograd::grad({(y * weights).sum()}, {moe.experts->gate_up_proj, moe.experts->down_proj, moe.gate->weight});
      auto reference = torch::autograd::grad({(expected * weights).sum()}, {moe.experts->gate_up_proj, moe.experts->down_proj, moe.gate->weight});
      for (std::size_t i = 0; i < grads.size(); ++i) {
        EXPECT_LT((grads[i] - reference[i]).abs().max().item<double>(), 1e-5) << i;
        EXPECT_GT(reference[i].abs().max().item<double>(), 0.0) << i;
      }
    }
  }
}

TEST(MixtureOfExperts, LayersParametersAndCountFollowTheConfig) {
  auto config = moe_config();
  config.moe_layer_step = 1, config.dense_layers = {1}, config.shared_expert_features = 8;
  dew::nn::CausalTransformer model(config);
  EXPECT_EQ(model->parameter_count(), dew::nn::parameter_count(config));
  auto* dense = model->model->layers[1]->as<dew::nn::DecoderBlockImpl>();
  EXPECT_TRUE(!dense->mlp.is_empty() && dense->moe.is_empty());
  auto* moe = model->model->layers[2]->as<dew::nn::DecoderBlockImpl>();
  ASSERT_TRUE(!moe->moe.is_empty() && moe->mlp.is_empty());
  EXPECT_EQ(moe->moe->experts->gate_up_proj.sizes(), (at::IntArrayRef{4, 24, 16}));
  EXPECT_EQ(moe->moe->experts->down_proj.sizes(), (at::IntArrayRef{4, 16, 12}));
  config.dense_layers = {}, config.moe_layer_step = 2;  // Qwen's decoder_sparse_step: layers 1, 3, ...
  EXPECT_FALSE(config.is_moe_layer(0));
  EXPECT_TRUE(config.is_moe_layer(1));
  EXPECT_FALSE(config.is_moe_layer(2));
  EXPECT_EQ(dew::nn::CausalTransformer(config)->parameter_count(), dew::nn::parameter_count(config));
}

TEST(MixtureOfExperts, BadSettingsAreRefusedByName) {
  auto refused = [](auto change, const std::string& field) {
    auto config = moe_config();
    change(config);
    EXPECT_NE(dew::test::error_of([&] { config.validate(); }).find(field), std::string::npos) << field;
  };
  refused([](CausalTransformerConfig& c) { c.experts_per_token = 5; }, "model.experts_per_token");
  refused([](CausalTransformerConfig& c) { c.num_experts = -1; }, "model.num_experts");
  refused([](CausalTransformerConfig& c) { c.dense_layers = {3}; }, "model.dense_layers");
  refused([](CausalTransformerConfig& c) { c.moe_layer_step = 0; }, "model.moe_layer_step");
  refused([](CausalTransformerConfig& c) { c.mlp = "gelu"; }, "model.mlp");
  refused([](CausalTransformerConfig& c) { c.router_aux_loss_coef = -1; }, "model.router_aux_loss_coef");
  auto dense = moe_config();
  dense.num_experts = 0, dense.experts_per_token = 99;  // unread without experts
  EXPECT_NO_THROW(dense.validate());
}

// Two tokens, two experts, top-1: probabilities (1/4, 3/4) and (3/4, 1/4), so each expert takes one token
// (f = 1/2 each) with mean probability 1/2: aux = 2 * (1/2 * 1/2 + 1/2 * 1/2) = 1. Each token's logsumexp is
// log(1 + 3) = log 4 (logits 0 and log 3): z = log(4)^2. A third, masked token changes nothing.
TEST(RouterLosses, MatchAHandWorkedCase) {
  const double l3 = std::log(3.0);
  auto logits = at::tensor({0.0, l3, l3, 0.0, 5.0, -5.0}, at::kFloat).view({3, 2});
  auto chosen = at::tensor({1, 0, 0}, at::kLong).view({3, 1});
  auto mask = at::tensor({1.0, 1.0, 0.0}, at::kFloat);
  auto terms = dew::objectives::router_losses({{logits, chosen}}, 2, mask);
  EXPECT_NEAR(terms.aux.item<double>(), 1.0, 1e-6);
  EXPECT_NEAR(terms.z.item<double>(), std::pow(std::log(4.0), 2), 1e-6);
  EXPECT_NEAR(terms.load[0].item<double>(), 0.5, 1e-7);
  // Two layers pooled as transformers pools them: the sums over both, then the product.
  auto skewed = at::tensor({0, 0, 0}, at::kLong).view({3, 1});
  auto pooled = dew::objectives::router_losses({{logits, chosen}, {logits, skewed}}, 2, mask);
  // f = (3/4, 1/4) over four token slots, P = (1/2, 1/2): aux = 2 * (3/8 + 1/8) = 1.
  EXPECT_NEAR(pooled.aux.item<double>(), 1.0, 1e-6);
  EXPECT_NEAR(pooled.load[0].item<double>(), 0.75, 1e-7);
}

// LoRA on the grouped experts: zero B leaves the output as it was; merging folds B A into each expert.
TEST(MixtureOfExperts, ExpertLoraMergesIntoTheGroupedWeights) {
  auto config = moe_config();
  dew::nn::CausalTransformer model(config);
  model->init_parameters(5);
  auto ids = at::arange(12, at::kLong).remainder(config.vocab_size).view({2, 6});
  at::Tensor base;
  {
    at::NoGradGuard no_grad;
    base = model->forward({ids});
  }
  dew::nn::LoraConfig lora;
  lora.rank = 2, lora.modules = "experts.gate_up_proj,experts.down_proj,q_proj";
  dew::nn::add_lora(model, lora, 1);
  auto adapters = dew::nn::lora_parameters(*model);
  ASSERT_TRUE(adapters.count("model.layers.0.mlp.experts.lora_gate_up_proj.lora_A.weight"));
  EXPECT_EQ(adapters.at("model.layers.0.mlp.experts.lora_gate_up_proj.lora_B.weight").sizes(), (at::IntArrayRef{4, 24, 2}));
  at::NoGradGuard no_grad;
  EXPECT_TRUE(at::equal(model->forward({ids}), base));
  for (auto& [name, p] : adapters) p.normal_(0, 0.3);
  auto adapted = model->forward({ids});
  EXPECT_GT((adapted - base).abs().max().item<double>(), 1e-3);
  {
    dew::nn::AdaptersOff off(model);
    EXPECT_TRUE(at::equal(model->forward({ids}), base));
  }
  dew::nn::merge_lora(model);
  EXPECT_FALSE(dew::nn::has_lora(*model));
  // Merged weights compute the same products in a different order: float32 rounding of values of order 1.
  EXPECT_LT((model->forward({ids}) - adapted).abs().max().item<double>(), 1e-5);
  lora.dropout = 0.1;
  EXPECT_NE(dew::test::error_of([&] { dew::nn::add_lora(model, lora, 1); }).find("lora.dropout"), std::string::npos);
}

}  // namespace
