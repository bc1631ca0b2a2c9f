// LoRA on the wider Hugging Face families (gpt2, gpt_neox, phi3, olmo2, granite) against PyPI peft on
// transformers' own model (fixtures from tools/reference/make_hf_family_fixtures.py): with the same random
// adapters on the projections each family stores unfused, dew's adapted logits, next-token loss and the
// loss's gradients with respect to every adapter matrix equal peft's. For the mixtures of experts the adapters
// include peft's target_parameters LoRA on the grouped expert tensors (one A_e, B_e per expert).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <set>

#include "dew/formats/safetensors.h"
#include "dew/interop/hf_model.h"
#include "dew/nn/lora.h"
#include "dew/nn/parameters.h"
#include "test_support.h"

namespace {

const std::string kLora = "lora.", kGrad = "grad.";

double max_abs(const at::Tensor& t) { return t.abs().max().item<double>(); }

class HfFamilyLora : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFamilyLora, GradientsMatchPeft) {
  const auto dir = dew::test::fixtures() / "hf" / GetParam();
  auto model = dew::interop::load_hf_model(dir).model;
  dew::formats::SafetensorsFile io(dir / "io.safetensors");
  // The adapted modules are the ones the fixture has adapters for.
  const auto names = io.names();
  std::set<std::string> modules;
  for (const auto& name : names) {
    if (!name.starts_with(kLora)) continue;
    // The grouped experts' adapters: experts.lora_gate_up_proj.lora_A.weight adapts experts.gate_up_proj.
    if (auto at = name.find(".experts.lora_"); at != std::string::npos) {
      auto tensor = name.substr(at + 14);
      modules.insert("experts." + tensor.substr(0, tensor.find(".lora_")));
      continue;
    }
    auto module = name.substr(0, name.find(".lora_"));
    modules.insert(module.substr(module.rfind('.') + 1));
  }
  ASSERT_FALSE(modules.empty());
  dew::nn::LoraConfig config;
  config.rank = 4, config.alpha = 8;
  config.modules.clear();
  for (const auto& m : modules) config.modules += (config.modules.empty() ? "" : ",") + m;
  dew::nn::add_lora(model, config, 0);
  auto adapters = dew::nn::lora_parameters(*model);
  {
    at::NoGradGuard no_grad;
    for (auto& [name, p] : adapters) p.copy_(io.load(kLora + name));
  }
  ASSERT_EQ(adapters.size() * 2, static_cast<std::size_t>(std::count_if(names.begin(), names.end(), [](const auto& n) {
              return n.starts_with(kLora) || n.starts_with(kGrad);
            })));

  auto ids = io.load("ids");
  auto logits = model->forward({ids});
  // Float32 through two layers of values of order 1: a few ulp of the largest logit.
  EXPECT_LT(max_abs(logits - io.load("lora_logits")), 1e-5);
  auto V = logits.size(-1);
  auto loss = at::cross_entropy_loss(logits.narrow(1, 0, ids.size(1) - 1).reshape({-1, V}), ids.narrow(1, 1, ids.size(1) - 1).reshape({-1}));
  EXPECT_NEAR(loss.item<double>(), io.load("lora_loss").item<double>(), 1e-6);
  loss.backward();
  for (auto& [name, p] : adapters) {
    ASSERT_TRUE(p.grad().defined()) << name;
    auto expected = io.load(kGrad + name);
    // Each gradient entry sums 22 positions' contributions in float32: 1e-5 relative to its largest entry.
    EXPECT_LE(max_abs(p.grad() - expected), 1e-5 * std::max(1.0, max_abs(expected))) << name;
    EXPECT_GT(max_abs(expected), 0.0) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, HfFamilyLora,
                         ::testing::Values("gpt2", "gpt_neox", "phi3", "olmo2", "granite", "mixtral", "qwen2_moe", "qwen3_moe"));

}  // namespace
