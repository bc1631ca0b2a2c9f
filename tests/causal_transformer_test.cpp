// CausalTransformer against transformers' Qwen3 and Llama on the same weights (fixtures from
// tools/reference/make_lm_fixtures.py): logits, loss and every parameter's gradient; plus the masks'
// equivalences (packed = separate documents, sliding windows) and the KV cache.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "dew/core/config.h"
#include "dew/formats/safetensors.h"
#include "dew/nn/causal_transformer.h"
#include "dew/nn/parameters.h"
#include "test_support.h"

namespace {
using dew::nn::CausalTransformer;
using dew::nn::CausalTransformerConfig;

CausalTransformerConfig fixture_config(const std::string& name) {
  CausalTransformerConfig config;
  auto path = dew::test::fixtures() / "lm" / name / "config.json";
  dew::config::from_json(dew::config::parse_json_file(path), config, path.string());
  return config;
}

CausalTransformer fixture_model(const std::string& name) {
  CausalTransformer model(fixture_config(name));
  dew::nn::load_parameters(*model, dew::formats::SafetensorsFile(dew::test::fixtures() / "lm" / name / "weights.safetensors"));
  return model;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

class ReferenceParity : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceParity, LogitsLossAndGradientsMatchTransformers) {
  auto model = fixture_model(GetParam());
  dew::formats::SafetensorsFile io(dew::test::fixtures() / "lm" / GetParam() / "io.safetensors");
  auto text = io.load("text");
  auto logits = model->forward({text.narrow(1, 0, text.size(1) - 1)});
  EXPECT_LT(max_abs_diff(logits, io.load("logits")), 1e-5);
  auto vocab = logits.size(-1);
  auto loss = at::cross_entropy_loss(logits.reshape({-1, vocab}), text.narrow(1, 1, text.size(1) - 1).reshape(-1));
  EXPECT_NEAR(loss.item<double>(), io.load("loss").item<double>(), 1e-6);
  loss.backward();
  dew::formats::SafetensorsFile grads(dew::test::fixtures() / "lm" / GetParam() / "grads.safetensors");
  auto params = dew::nn::parameter_map(*model);
  EXPECT_EQ(params.size(), grads.names().size());
  for (const auto& [name, p] : params) {
    auto expected = grads.load(name);
    double scale = std::max(1e-3, expected.abs().max().item<double>());
    EXPECT_LT(max_abs_diff(p.grad(), expected) / scale, 1e-4) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ReferenceParity, ::testing::Values("qwen3", "llama"));

TEST(CausalTransformer, ParameterNamesFollowHuggingFace) {
  auto params = dew::nn::parameter_map(*fixture_model("llama"));
  for (const char* name : {"model.embed_tokens.weight", "model.layers.1.self_attn.q_proj.weight",
                           "model.layers.0.mlp.down_proj.weight", "model.layers.0.input_layernorm.weight",
                           "model.layers.0.post_attention_layernorm.weight", "model.norm.weight", "lm_head.weight"}) {
    EXPECT_TRUE(params.count(name)) << name;
  }
  EXPECT_FALSE(dew::nn::parameter_map(*fixture_model("qwen3")).count("lm_head.weight"));  // tied
}

TEST(CausalTransformer, PackedDocumentsEqualSeparateDocuments) {
  auto model = fixture_model("qwen3");
  at::NoGradGuard no_grad;
  auto a = at::tensor({5, 9, 2, 33, 7}, at::kLong), b = at::tensor({40, 1, 12}, at::kLong);
  auto packed = at::cat({a, b, at::zeros({2}, at::kLong)}).unsqueeze(0);  // two documents then padding
  auto segments = at::tensor({1, 1, 1, 1, 1, 2, 2, 2, 0, 0}, at::kLong).unsqueeze(0);
  auto positions = at::tensor({0, 1, 2, 3, 4, 0, 1, 2, 0, 0}, at::kLong).unsqueeze(0);
  auto together = model->forward({packed, positions, segments});
  auto alone_a = model->forward({a.unsqueeze(0)});
  auto alone_b = model->forward({b.unsqueeze(0)});
  EXPECT_LT(max_abs_diff(together.narrow(1, 0, 5), alone_a), 1e-5);
  EXPECT_LT(max_abs_diff(together.narrow(1, 5, 3), alone_b), 1e-5);
  EXPECT_TRUE(at::isfinite(together).all().item<bool>());  // padding rows stay finite
}

TEST(CausalTransformer, SlidingWindowSeesOnlyRecentKeys) {
  auto config = fixture_config("qwen3");
  config.num_layers = 1;
  config.layer_types = {"sliding_attention"};
  config.kinds["sliding_attention"].window = 3;
  CausalTransformer windowed(config);
  at::NoGradGuard no_grad;
  auto ids = at::tensor({3, 14, 15, 9, 26, 5, 35, 8}, at::kLong).unsqueeze(0);
  auto full = windowed->forward({ids});
  // With a window of 3 the last position sees only the last 3 tokens: the same as running those alone,
  // once positions are kept.
  auto tail = ids.narrow(1, 5, 3);
  auto tail_positions = at::arange(5, 8, at::kLong).unsqueeze(0);
  auto alone = windowed->forward({tail, tail_positions});
  EXPECT_LT(max_abs_diff(full.narrow(1, 7, 1), alone.narrow(1, 2, 1)), 1e-5);
  // And it differs from full attention there (the window matters).
  config.layer_types.clear();
  CausalTransformer unwindowed(config);
  unwindowed->init_parameters(0);
  windowed->init_parameters(0);
  EXPECT_GT(max_abs_diff(windowed->forward({ids}).narrow(1, 7, 1), unwindowed->forward({ids}).narrow(1, 7, 1)), 1e-4);
}

TEST(CausalTransformer, CachedDecodingEqualsFullForward) {
  auto model = fixture_model("llama");
  at::NoGradGuard no_grad;
  auto ids = at::tensor({4, 8, 15, 16, 23, 42, 7, 1, 9, 9, 3, 60, 2, 11, 5, 30}, at::kLong).view({2, 8});
  auto full = model->forward({ids});
  auto cache = dew::nn::KVCache::allocate(model->config(), 2, 8, at::kFloat, at::kCPU);
  // Slots by position: each call names its tokens' positions and the span of slots it attends over.
  auto positions = [](std::int64_t first, std::int64_t count) {
    return at::arange(first, first + count, at::kLong).unsqueeze(0).expand({2, count});
  };
  cache.span = 5;
  auto prefill = model->forward({ids.narrow(1, 0, 5), positions(0, 5), {}, &cache});
  EXPECT_LT(max_abs_diff(prefill, full.narrow(1, 0, 5)), 1e-5);
  for (int t = 5; t < 8; ++t) {
    cache.span = t + 1;
    auto step = model->forward({ids.narrow(1, t, 1), positions(t, 1), {}, &cache});
    EXPECT_LT(max_abs_diff(step, full.narrow(1, t, 1)), 1e-5) << "step " << t;
  }
  cache.span = 9;
  EXPECT_THROW(model->forward({ids.narrow(1, 0, 1), positions(8, 1), {}, &cache}), dew::Error);  // past the capacity
  cache.span = 8;
  EXPECT_THROW(model->forward({ids.narrow(1, 0, 1), {}, {}, &cache}), dew::Error);  // no positions to name the slots
}

TEST(CausalTransformer, InitIsDeterministicAndConfigIsValidated) {
  auto config = fixture_config("qwen3");
  CausalTransformer a(config), b(config);
  a->init_parameters(7);
  b->init_parameters(7);
  for (const auto& [name, p] : dew::nn::parameter_map(*a)) EXPECT_TRUE(p.equal(dew::nn::parameter_map(*b).at(name))) << name;
  config.num_kv_heads = 3;
  EXPECT_THROW(CausalTransformer{config}, dew::Error);
  config = fixture_config("qwen3");
  config.layer_types = {"sliding_attention", "full_attention"};
  EXPECT_THROW(CausalTransformer{config}, dew::Error);  // kind not defined
}

TEST(CausalTransformer, WrongCheckpointIsRefusedByName) {
  CausalTransformer model(fixture_config("llama"));
  try {
    dew::nn::load_parameters(*model, dew::formats::SafetensorsFile(dew::test::fixtures() / "lm" / "qwen3" / "weights.safetensors"));
    FAIL();
  } catch (const dew::Error& e) {
    EXPECT_NE(std::string(e.what()).find("lm_head.weight"), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(CausalTransformer, MixedPrecisionKeepsTheResidualStreamInFloat32) {
  // 16 blocks whose outputs are ~1% of the stream (o_proj and down_proj scaled by 0.01), as in a trained
  // model's late layers or a LoRA update. In a bfloat16 stream each of the 32 adds rounds the stream
  // (relative error up to 2^-9 per add, ~sqrt(32) * 2^-9 / sqrt(3) ~ 0.6% in all); with a float32 stream
  // the sublayers' outputs carry bfloat16 rounding of ~0.01 |x|, negligible, and what remains is the final
  // cast of the hidden states to bfloat16 (~2^-9 / sqrt(3) ~ 0.1%). So the mixed model's mean error against
  // the float32 model is several times smaller; 0.6x leaves a wide margin on any CPU.
  auto config = fixture_config("llama");
  config.num_layers = 16;
  config.layer_types.clear();
  CausalTransformer reference(config);
  {
    at::NoGradGuard no_grad;
    for (auto& [name, p] : dew::nn::parameter_map(*reference)) {
      if (name.find("o_proj") != std::string::npos || name.find("down_proj") != std::string::npos) p.mul_(0.01);
    }
  }
  auto ids = at::randint(0, config.vocab_size, {2, 12}, at::make_generator<at::CPUGeneratorImpl>(5));
  auto with_dtypes = [&](const std::string& residual) {
    auto c = config;
    c.dtype = "bfloat16";
    c.residual_dtype = residual;
    CausalTransformer model(c, dew::nn::ParameterInit::none);
    dew::nn::load_parameters(*model, dew::nn::parameter_map(*reference), "the fp32 reference");
    auto hidden = model->hidden_states({ids});
    EXPECT_EQ(hidden.scalar_type(), at::kBFloat16);  // what callers get stays the compute dtype
    return hidden.to(at::kFloat);
  };
  auto want = reference->hidden_states({ids});
  auto mean_error = [&](const at::Tensor& got) { return (got - want).abs().mean().item<double>(); };
  double mixed = mean_error(with_dtypes("float32")), pure = mean_error(with_dtypes("bfloat16"));
  EXPECT_GT(pure, 0.0);
  EXPECT_LT(mixed, 0.6 * pure) << "mixed " << mixed << " pure bf16 " << pure;
  auto bad = config;
  bad.residual_dtype = "float64";
  EXPECT_NE(dew::test::error_of([&] { bad.validate(); }).find("model.residual_dtype is 'float64'"), std::string::npos);
}
