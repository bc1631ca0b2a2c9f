// LoRA on the wider Hugging Face families (gpt2, gpt_neox, phi3, olmo2, granite) against PyPI peft on
// transformers' own model (fixtures from tools/reference/make_hf_family_fixtures.py): with the same random
// adapters on the projections each family stores unfused, dew's adapted logits, next-token loss and the
// loss's gradients with respect to every adapter matrix equal peft's. For the mixtures of experts the adapters
// include peft's target_parameters LoRA on the grouped expert tensors (one A_e, B_e per expert). Then targets in
// the family's own names, fused matrices among them (one adapter on c_attn, query_key_value, qkv_proj,
// gate_up_proj, as peft makes it): the same equalities, peft's adapter directory read, and dew's export in the
// family's names written as peft writes it and (with DEW_REFERENCE_PYTHON) read back by peft itself.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <set>

#include "dew/core/config.h"
#include "dew/core/error.h"

#include "dew/formats/safetensors.h"
#include "dew/interop/hf_lora_targets.h"
#include "dew/interop/hf_model.h"
#include "dew/interop/peft_adapter.h"
#include "dew/nn/lora.h"
#include "dew/nn/parameters.h"
#include "test_support.h"

namespace {

const std::string kLora = "lora.", kGrad = "grad.";

double max_abs(const at::Tensor& t) { return t.abs().max().item<double>(); }

// The model with the fixture's first adapter (on the unfused projections, keyed by dew's names).
dew::nn::CausalTransformer unfused_adapted(const std::string& family, dew::formats::SafetensorsFile& io, dew::nn::LoraConfig* used = nullptr) {
  auto model = dew::interop::load_hf_model(dew::test::fixtures() / "hf" / family).model;
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
  EXPECT_FALSE(modules.empty());
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
  EXPECT_EQ(adapters.size() * 2, static_cast<std::size_t>(std::count_if(names.begin(), names.end(), [](const auto& n) {
              return n.starts_with(kLora) || n.starts_with(kGrad);
            })));
  if (used) *used = config;
  return model;
}

// peft loads ADAPTER onto transformers' model from BASE and computes `logits` on `ids` within 1e-5 (float32
// through two layers: a few ulp of logits of order 1), by tools/reference/check_peft_export.py with
// DEW_REFERENCE_PYTHON; skipped without it.
void expect_peft_reads(const std::filesystem::path& base, const std::filesystem::path& adapter, const at::Tensor& ids,
                       const at::Tensor& logits, const std::filesystem::path& scratch) {
  const char* python = std::getenv("DEW_REFERENCE_PYTHON");
  if (!python || !*python) GTEST_SKIP() << "set DEW_REFERENCE_PYTHON to a Python with peft to check the export with it";
  dew::formats::save_safetensors(scratch / "logits.safetensors", {{"ids", ids}, {"logits", logits.contiguous()}});
  auto script = dew::test::fixtures().parent_path().parent_path() / "tools" / "reference" / "check_peft_export.py";
  auto result = dew::test::run_command("HF_HUB_OFFLINE=1 '" + std::string(python) + "' '" + script.string() + "' '" + base.string() +
                                       "' '" + adapter.string() + "' '" + (scratch / "logits.safetensors").string() +
                                       "' --tolerance 1e-5 2>&1");
  EXPECT_EQ(result.status, 0) << result.output;
  std::cout << "[ peft ] " << result.output;
}

at::Tensor logits_of(dew::nn::CausalTransformer& model, const at::Tensor& ids) {
  at::NoGradGuard no_grad;
  return model->forward({ids});
}

class HfFamilyLora : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFamilyLora, GradientsMatchPeft) {
  const auto dir = dew::test::fixtures() / "hf" / GetParam();
  dew::formats::SafetensorsFile io(dir / "io.safetensors");
  auto model = unfused_adapted(GetParam(), io);
  auto adapters = dew::nn::lora_parameters(*model);

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

// `export --format peft` of adapters made with dew's names on the unfused projections writes the family's own
// module paths and target_modules (gpt2: transformer.h.N.attn.c_proj, target c_proj), dew reads them back bit for
// bit, and peft loads them onto transformers' model with dew's logits.
// (The mixtures of experts are not here: their expert adapters are peft target_parameters, which the export
// refuses by name; peft_adapter.cpp.)
class HfFamilyPeftExport : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFamilyPeftExport, ExportReadBackByPeft) {
  const auto family = GetParam();
  const auto dir = dew::test::fixtures() / "hf" / family;
  dew::formats::SafetensorsFile io(dir / "io.safetensors");
  dew::nn::LoraConfig config;
  auto model = unfused_adapted(family, io, &config);
  dew::test::TempDir tmp;
  dew::interop::write_peft_adapter(model, config, "", tmp / "adapter", family);
  std::set<std::string> family_modules;
  for (const auto& [dew, stored] : dew::interop::hf_lora_module_paths(family, model)) family_modules.insert(stored);
  dew::formats::SafetensorsFile written(tmp / "adapter" / "adapter_model.safetensors");
  EXPECT_EQ(written.names().size(), dew::nn::lora_parameters(*model).size());
  for (const auto& name : written.names()) {
    auto module = name.substr(std::string("base_model.model.").size());
    EXPECT_TRUE(family_modules.count(module.substr(0, module.rfind(".lora_")))) << name;
  }
  auto ids = io.load("ids");
  auto logits = logits_of(model, ids);
  auto again = dew::interop::load_hf_model(dir).model;
  dew::interop::load_peft_adapter(again, tmp / "adapter", family);
  EXPECT_TRUE(at::equal(logits_of(again, ids), logits));
  expect_peft_reads(dir, tmp / "adapter", ids, logits, tmp.path());
}

INSTANTIATE_TEST_SUITE_P(Families, HfFamilyPeftExport, ::testing::Values("gpt2", "gpt_neox", "phi3", "olmo2", "granite"));
INSTANTIATE_TEST_SUITE_P(Families, HfFamilyLora,
                         ::testing::Values("gpt2", "gpt_neox", "phi3", "olmo2", "granite", "mixtral", "qwen2_moe", "qwen3_moe"));

// The fixture's second adapter, in the family's names (family_lora.transformer.h.0.attn.c_attn.lora_A.weight).
const std::string kFamilyLora = "family_lora.", kFamilyGrad = "family_grad.";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The family module path -> dew's adapter module (the inverse of hf_lora_module_paths).
std::map<std::string, std::string> dew_module_of(const std::string& family, const dew::nn::CausalTransformer& model) {
  std::map<std::string, std::string> out;
  for (const auto& [dew, stored] : dew::interop::hf_lora_module_paths(family, model)) out.emplace(stored, dew);
  return out;
}

// "transformer.h.0.attn.c_attn.lora_A.weight" -> "model.layers.0.self_attn.c_attn.lora_A.weight".
std::string dew_name_of(const std::map<std::string, std::string>& modules, const std::string& stored) {
  const auto module = stored.substr(0, stored.rfind(".lora_"));
  return modules.at(module) + stored.substr(module.size());
}

// The model with the fixture's family-named adapter: lora.modules = the family's leaf names the fixture adapts.
dew::nn::CausalTransformer family_adapted(const std::string& family, dew::formats::SafetensorsFile& io, dew::nn::LoraConfig* used = nullptr) {
  auto model = dew::interop::load_hf_model(dew::test::fixtures() / "hf" / family).model;
  std::set<std::string> leaves;
  for (const auto& name : io.names()) {
    if (!name.starts_with(kFamilyLora)) continue;
    auto module = name.substr(0, name.find(".lora_"));
    leaves.insert(module.substr(module.rfind('.') + 1));
  }
  dew::nn::LoraConfig config;
  config.rank = 4, config.alpha = 8;
  config.modules.clear();
  for (const auto& m : leaves) config.modules += (config.modules.empty() ? "" : ",") + m;
  dew::nn::add_lora(model, config, 0, dew::interop::hf_lora_target_names(family, model));
  const auto modules = dew_module_of(family, model);
  auto adapters = dew::nn::lora_parameters(*model);
  std::size_t copied = 0;
  at::NoGradGuard no_grad;
  for (const auto& name : io.names()) {
    if (!name.starts_with(kFamilyLora)) continue;
    adapters.at(dew_name_of(modules, name.substr(kFamilyLora.size()))).copy_(io.load(name));
    ++copied;
  }
  EXPECT_EQ(copied, adapters.size());
  if (used) *used = config;
  return model;
}

at::Tensor next_token_loss(const at::Tensor& logits, const at::Tensor& ids) {
  auto V = logits.size(-1);
  return at::cross_entropy_loss(logits.narrow(1, 0, ids.size(1) - 1).reshape({-1, V}), ids.narrow(1, 1, ids.size(1) - 1).reshape({-1}));
}

class HfFamilyNamedLora : public ::testing::TestWithParam<std::string> {};

// One adapter on each fused matrix (A [4, in] shared by q, k, v; B [q + k + v rows, 4] routed to the parts by
// the weight's own layout) and the unfused targets by the family's names: logits, loss and every gradient of
// A and B equal peft's.
TEST_P(HfFamilyNamedLora, FusedGradientsMatchPeft) {
  const auto family = GetParam();
  dew::formats::SafetensorsFile io(dew::test::fixtures() / "hf" / family / "io.safetensors");
  auto model = family_adapted(family, io);
  const auto modules = dew_module_of(family, model);
  auto adapters = dew::nn::lora_parameters(*model);
  bool fused = false;
  const auto& choices = dew::nn::lora_module_choices();
  for (const auto& [name, p] : adapters) {
    auto module = name.substr(0, name.find(".lora_"));
    fused = fused || std::find(choices.begin(), choices.end(), module.substr(module.rfind('.') + 1)) == choices.end();
  }
  EXPECT_TRUE(fused) << "the fixture adapts no fused module";

  auto ids = io.load("ids");
  auto logits = model->forward({ids});
  // Float32 through two layers of values of order 1: a few ulp of the largest logit.
  EXPECT_LT(max_abs(logits - io.load("family_lora_logits")), 1e-5);
  auto loss = next_token_loss(logits, ids);
  EXPECT_NEAR(loss.item<double>(), io.load("family_lora_loss").item<double>(), 1e-6);
  loss.backward();
  for (const auto& name : io.names()) {
    if (!name.starts_with(kFamilyGrad)) continue;
    const auto dew_name = dew_name_of(modules, name.substr(kFamilyGrad.size()));
    const auto& p = adapters.at(dew_name);
    ASSERT_TRUE(p.grad().defined()) << dew_name;
    auto expected = io.load(name);
    // A fused A's gradient is peft's one product summed in dew over three parts' products: each entry still
    // sums 22 positions times at most 96 rows of float32 products, within n * 2^-24 of the sum of magnitudes;
    // 1e-5 of the largest entry bounds that.
    EXPECT_LE(max_abs(p.grad() - expected), 1e-5 * std::max(1.0, max_abs(expected))) << dew_name;
    EXPECT_GT(max_abs(expected), 0.0) << dew_name;
  }
}

// peft's own adapter directory for the family (save_pretrained of the same adapter) loads onto dew's model by
// the family's module names, fused ones included, and computes peft's logits.
TEST_P(HfFamilyNamedLora, PeftDirectoryLoads) {
  const auto family = GetParam();
  const auto dir = dew::test::fixtures() / "hf" / family;
  dew::formats::SafetensorsFile io(dir / "io.safetensors");
  auto model = dew::interop::load_hf_model(dir).model;
  auto config = dew::interop::load_peft_adapter(model, dir / "peft_adapter", family);
  EXPECT_EQ(config.rank, 4);
  at::NoGradGuard no_grad;
  EXPECT_LT(max_abs(model->forward({io.load("ids")}) - io.load("family_lora_logits")), 1e-5);  // as above
}

// dew's export of that adapter is peft's directory: the same tensor names and values, target_modules and
// fan_in_fan_out; dew reads it back to the same logits; and peft loads it onto transformers' model with dew's
// logits (tools/reference/check_peft_export.py, with DEW_REFERENCE_PYTHON).
TEST_P(HfFamilyNamedLora, ExportIsPeftsDirectory) {
  const auto family = GetParam();
  const auto dir = dew::test::fixtures() / "hf" / family;
  dew::test::TempDir tmp;
  dew::formats::SafetensorsFile io(dir / "io.safetensors");
  dew::nn::LoraConfig config;
  auto model = family_adapted(family, io, &config);
  dew::interop::write_peft_adapter(model, config, "tiny-" + family, tmp / "adapter", family);

  dew::formats::SafetensorsFile peft(dir / "peft_adapter" / "adapter_model.safetensors");
  dew::formats::SafetensorsFile written(tmp / "adapter" / "adapter_model.safetensors");
  auto peft_names = peft.names(), written_names = written.names();
  std::sort(peft_names.begin(), peft_names.end());
  std::sort(written_names.begin(), written_names.end());
  ASSERT_EQ(written_names, peft_names);
  for (const auto& name : peft_names) EXPECT_TRUE(at::equal(written.load(name), peft.load(name))) << name;
  auto json = dew::config::parse_json_file(tmp / "adapter" / "adapter_config.json");
  auto peft_json = dew::config::parse_json_file(dir / "peft_adapter" / "adapter_config.json");
  auto targets = json["target_modules"].get<std::vector<std::string>>();
  std::sort(targets.begin(), targets.end());
  EXPECT_EQ(dew::config::Json(targets), peft_json["target_modules"]);
  EXPECT_EQ(json["fan_in_fan_out"], peft_json["fan_in_fan_out"]);

  auto ids = io.load("ids");
  auto logits = logits_of(model, ids);
  auto again = dew::interop::load_hf_model(dir).model;
  dew::interop::load_peft_adapter(again, tmp / "adapter", family);
  EXPECT_TRUE(at::equal(logits_of(again, ids), logits));
  expect_peft_reads(dir, tmp / "adapter", ids, logits, tmp.path());
}

INSTANTIATE_TEST_SUITE_P(Families, HfFamilyNamedLora, ::testing::Values("gpt2", "gpt_neox", "phi3"));

// dew's names on a fused family still give one adapter per projection (q, k, v apart); peft cannot express
// those on GPT-2's c_attn at rank r, so the export refuses, naming the module to train instead. Naming a
// projection twice (c_attn and q_proj) or a module the family lacks is refused by name.
TEST(HfFamilyNamedLoraErrors, DewNamesOnAFusedFamily) {
  const auto dir = dew::test::fixtures() / "hf" / "gpt2";
  auto model = dew::interop::load_hf_model(dir).model;
  const auto names = dew::interop::hf_lora_target_names("gpt2", model);
  dew::nn::LoraConfig config;
  config.rank = 4, config.alpha = 8, config.modules = "q_proj,v_proj";
  dew::nn::add_lora(model, config, 0, names);
  EXPECT_TRUE(dew::nn::lora_parameters(*model).count("model.layers.1.self_attn.v_proj.lora_B.weight"));
  dew::test::TempDir tmp;
  auto message = dew::test::error_of([&] { dew::interop::write_peft_adapter(model, config, "", tmp / "adapter", "gpt2"); });
  EXPECT_TRUE(contains(message, "inside the fused 'attn.c_attn'")) << message;
  EXPECT_TRUE(contains(message, "lora.modules naming 'c_attn'")) << message;
  EXPECT_FALSE(std::filesystem::exists(tmp / "adapter"));

  auto fresh = dew::interop::load_hf_model(dir).model;
  config.modules = "c_attn,q_proj";
  message = dew::test::error_of([&] { dew::nn::add_lora(fresh, config, 0, names); });
  EXPECT_TRUE(contains(message, "'c_attn' and 'q_proj', which both adapt 'model.layers.0.self_attn.q_proj'")) << message;
  config.modules = "qkv_proj";
  message = dew::test::error_of([&] { dew::nn::add_lora(fresh, config, 0, names); });
  EXPECT_TRUE(contains(message, "lora.modules names 'qkv_proj', which is not a projection")) << message;
  EXPECT_TRUE(contains(message, "attn.c_attn")) << message;
  EXPECT_FALSE(dew::nn::has_lora(*fresh));

  // attn.c_proj names one of GPT-2's two c_proj modules; merging and removing a fused adapter leave a plain model.
  config.modules = "c_attn,attn.c_proj";
  dew::nn::add_lora(fresh, config, 0, names);
  auto adapters = dew::nn::lora_parameters(*fresh);
  EXPECT_EQ(adapters.size(), 2u * 2u * 2u);  // A and B, two modules, two layers
  EXPECT_TRUE(adapters.count("model.layers.0.self_attn.c_attn.lora_A.weight"));
  EXPECT_TRUE(adapters.count("model.layers.0.self_attn.o_proj.lora_A.weight"));
  dew::nn::merge_lora(fresh);
  EXPECT_FALSE(dew::nn::has_lora(*fresh));
  EXPECT_EQ(dew::nn::parameter_map(*fresh).size(), dew::nn::parameter_map(*dew::interop::load_hf_model(dir).model).size());
}

// Merging a fused adapter folds each part's rows of B A into its weight: the merged model computes the adapted
// one's logits. Rounding W + s B A once to float32 per weight, against the unmerged W x + s B (A x), is fp32
// rounding through ~25 chained stages (tests/lora_test.cpp's fp32_tolerance): 1e-5 of the largest logit.
TEST_P(HfFamilyNamedLora, MergedFusedAdapterKeepsTheLogits) {
  const auto family = GetParam();
  dew::formats::SafetensorsFile io(dew::test::fixtures() / "hf" / family / "io.safetensors");
  auto model = family_adapted(family, io);
  auto ids = io.load("ids");
  auto adapted = logits_of(model, ids);
  const auto expected = io.load("family_lora_logits");
  dew::nn::merge_lora(model);
  EXPECT_FALSE(dew::nn::has_lora(*model));
  auto merged = logits_of(model, ids);
  EXPECT_LE(max_abs(merged - adapted), 1e-5 * max_abs(adapted));
  EXPECT_LE(max_abs(merged - expected), 1e-5 * max_abs(expected));
  // The comparison can fail: the adapter moves the logits far beyond the tolerance.
  auto base = dew::interop::load_hf_model(dew::test::fixtures() / "hf" / family).model;
  EXPECT_GT(max_abs(logits_of(base, ids) - expected), 100 * 1e-5 * max_abs(expected));
}

}  // namespace
