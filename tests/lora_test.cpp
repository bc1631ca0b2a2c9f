// LoRA adapters (nn/lora.h) and peft adapter directories (interop/peft_adapter.h), against PyPI peft's numbers
// for a tiny Llama (tests/fixtures/lora, from tools/reference/make_lora_fixtures.py): the adapted forward,
// merging, the directory round trip, what trains and what does not, dropout, the KV-cache path, errors.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/formats/safetensors.h"
#include "dew/interop/hf_model.h"
#include "dew/interop/peft_adapter.h"
#include "dew/nn/frozen_weights.h"
#include "dew/nn/kv_cache.h"
#include "dew/nn/lora.h"
#include "dew/nn/parameters.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using dew::nn::CausalTransformer;
using dew::nn::LoraConfig;

fs::path lora_fixtures() { return dew::test::fixtures() / "lora"; }

CausalTransformer base_model() { return dew::interop::load_hf_model(lora_fixtures() / "base").model; }

CausalTransformer adapted_model() {
  auto model = base_model();
  dew::interop::load_peft_adapter(model, lora_fixtures() / "adapter");
  return model;
}

const dew::config::Json& reference() {
  static const auto json = dew::config::parse_json_file(lora_fixtures() / "logits.json");
  return json;
}

at::Tensor reference_ids() {
  std::vector<std::int64_t> flat;
  for (const auto& row : reference()["ids"]) {
    for (const auto& id : row) flat.push_back(id.get<std::int64_t>());
  }
  auto rows = static_cast<std::int64_t>(reference()["ids"].size());
  return at::tensor(flat, at::kLong).view({rows, -1});
}

at::Tensor reference_logits(const std::string& key) {
  std::vector<float> flat;
  for (const auto& row : reference()[key]) {
    for (const auto& position : row) {
      for (const auto& v : position) flat.push_back(v.get<float>());
    }
  }
  auto ids = reference_ids();
  return at::tensor(flat, at::kFloat).view({ids.size(0), ids.size(1), -1});
}

at::Tensor logits_of(CausalTransformer& model, const at::Tensor& ids) {
  at::NoGradGuard no_grad;
  return model->forward({ids});
}

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

// dew against PyTorch on the same fp32 weights: the two differ only in summation order. A dot product of width d
// carries a relative error of about sqrt(d) * 6e-8 (random-walk rounding), ~4e-7 for the widest here (48); the
// fixture's decoder chains ~10 such stages per layer (norm, q/k/v, attention, o, norm, gate/up, down, each with
// its adapter) over 2 layers plus the head, ~25 in all, so ~1e-5 of the logits' scale. The bound is that
// relative to the largest logit; the adapter moves logits by ~2 (the fixture script prints it), 10^5 times more.
double fp32_tolerance(const at::Tensor& logits) { return 1e-5 * logits.abs().max().item<double>(); }

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

// A small native decoder (dew's own init) for the tests that need no reference numbers.
CausalTransformer tiny_model(const std::string& mlp = "swiglu") {
  dew::nn::CausalTransformerConfig config;
  config.vocab_size = 48, config.emb_features = 16, config.num_layers = 2, config.num_heads = 2, config.max_seq_len = 16;
  config.mlp = mlp;
  CausalTransformer model(config);
  model->init_parameters(3);
  return model;
}

LoraConfig lora(std::int64_t rank = 4, double alpha = 8, const std::string& modules = LoraConfig{}.modules) {
  LoraConfig config;
  config.rank = rank, config.alpha = alpha, config.modules = modules;
  return config;
}

// Gives every B random values (add_lora's B is zero, which would make the adapters invisible).
void randomize_b(CausalTransformer& model, std::uint64_t seed) {
  at::NoGradGuard no_grad;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (auto& [name, p] : dew::nn::lora_parameters(*model)) {
    if (contains(name, ".lora_B.")) p.copy_(at::empty(p.sizes(), at::kFloat).normal_(0.0, 0.2, generator));
  }
}

TEST(Lora, PeftFixtureLogitsMatch) {
  auto ids = reference_ids();
  auto base = base_model();
  auto base_logits = logits_of(base, ids);
  auto expected_base = reference_logits("base");
  EXPECT_LE(max_diff(base_logits, expected_base), fp32_tolerance(expected_base));

  auto model = adapted_model();
  auto logits = logits_of(model, ids);
  auto expected = reference_logits("adapted");
  EXPECT_LE(max_diff(logits, expected), fp32_tolerance(expected)) << "adapted logits differ from peft's";
  // The comparison can fail: the adapter moves the logits far beyond the tolerance.
  EXPECT_GT(max_diff(expected, expected_base), 100 * fp32_tolerance(expected));
  // A scale of alpha instead of alpha / r (a classic slip) is caught.
  for (auto& item : model->named_modules("", false)) {
    if (auto linear = std::dynamic_pointer_cast<dew::nn::LinearImpl>(item.value()); linear && linear->lora_A) linear->lora_scale *= 4;
  }
  EXPECT_GT(max_diff(logits_of(model, ids), expected), 100 * fp32_tolerance(expected));
}

TEST(Lora, MergeGivesTheUnmergedLogits) {
  auto ids = reference_ids();
  auto model = adapted_model();
  auto unmerged = logits_of(model, ids);
  dew::nn::merge_lora(model);
  EXPECT_FALSE(dew::nn::has_lora(*model));
  // A plain decoder again: the base model's parameter names, all trainable.
  auto names = dew::nn::parameter_map(*model), base_names = dew::nn::parameter_map(*base_model());
  ASSERT_EQ(names.size(), base_names.size());
  for (const auto& [name, p] : names) {
    EXPECT_TRUE(base_names.count(name)) << name;
    EXPECT_TRUE(p.requires_grad()) << name;
  }
  // W + s B A rounded once to fp32 against W x + s B (A x): the same fp32 rounding argument as above.
  auto merged = logits_of(model, ids);
  EXPECT_LE(max_diff(merged, unmerged), fp32_tolerance(unmerged));
  auto expected = reference_logits("merged");
  EXPECT_LE(max_diff(merged, expected), fp32_tolerance(expected)) << "merged logits differ from peft's merge_and_unload";
}

TEST(Lora, PeftDirectoryRoundTripsBitExactly) {
  dew::test::TempDir tmp;
  auto model = adapted_model();
  auto config = dew::interop::read_peft_adapter(lora_fixtures() / "adapter").config;
  EXPECT_EQ(config.rank, 4);
  EXPECT_EQ(config.alpha, 8);
  dew::interop::write_peft_adapter(model, config, "tiny-llama", tmp / "out");

  dew::formats::SafetensorsFile original(lora_fixtures() / "adapter" / "adapter_model.safetensors");
  dew::formats::SafetensorsFile written(tmp / "out" / "adapter_model.safetensors");
  auto original_names = original.names(), written_names = written.names();
  std::sort(original_names.begin(), original_names.end());
  std::sort(written_names.begin(), written_names.end());
  ASSERT_EQ(written_names, original_names);
  EXPECT_EQ(written_names.size(), 2u * 7u * 2u);  // A and B, seven projections, two layers
  for (const auto& name : original_names) {
    EXPECT_EQ(written.entry(name).dtype, original.entry(name).dtype) << name;
    EXPECT_TRUE(at::equal(written.load(name), original.load(name))) << name;
  }
  auto json = dew::config::parse_json_file(tmp / "out" / "adapter_config.json");
  auto reference_json = dew::config::parse_json_file(lora_fixtures() / "adapter" / "adapter_config.json");
  for (const char* key : {"peft_type", "task_type", "r", "lora_alpha", "lora_dropout", "bias", "fan_in_fan_out", "use_dora",
                          "use_rslora", "inference_mode"}) {
    EXPECT_EQ(json[key], reference_json[key]) << key;
  }
  auto targets = json["target_modules"].get<std::vector<std::string>>();
  auto reference_targets = reference_json["target_modules"].get<std::vector<std::string>>();
  std::sort(targets.begin(), targets.end());
  std::sort(reference_targets.begin(), reference_targets.end());
  EXPECT_EQ(targets, reference_targets);
  EXPECT_EQ(json["base_model_name_or_path"], "tiny-llama");

  // Read back onto a fresh base: the same logits, bit for bit.
  auto again = base_model();
  dew::interop::load_peft_adapter(again, tmp / "out");
  auto ids = reference_ids();
  EXPECT_TRUE(at::equal(logits_of(again, ids), logits_of(model, ids)));
}

TEST(Lora, OnlyAdaptersTrain) {
  auto model = tiny_model();
  auto base_params = model->parameter_count();
  auto count = dew::nn::add_lora(model, lora(4, 8, "q_proj,v_proj,down_proj"), 11);
  // q_proj, v_proj: 4 * (16 + 16) each; down_proj: 4 * (64 + 16); per layer, two layers.
  EXPECT_EQ(count, 2 * (2 * 4 * (16 + 16) + 4 * (64 + 16)));
  EXPECT_EQ(model->parameter_count(), base_params + count);
  auto adapters = dew::nn::lora_parameters(*model);
  EXPECT_EQ(adapters.size(), 2u * 3u * 2u);
  EXPECT_TRUE(adapters.count("model.layers.1.mlp.down_proj.lora_B.weight"));
  for (const auto& [name, p] : dew::nn::parameter_map(*model)) {
    EXPECT_EQ(p.requires_grad(), adapters.count(name) > 0) << name;
  }

  // A backward leaves gradients on the adapters only. B starts at zero, so A's gradient is zero at first
  // and B's is not.
  randomize_b(model, 5);
  auto ids = at::arange(10, at::kLong).view({1, 10});
  model->forward({ids}).logsumexp(-1).sum().backward();
  for (const auto& [name, p] : dew::nn::parameter_map(*model)) {
    if (adapters.count(name)) {
      ASSERT_TRUE(p.grad().defined()) << name;
      EXPECT_GT(p.grad().abs().sum().item<double>(), 0.0) << name;
    } else {
      EXPECT_FALSE(p.grad().defined()) << name;
    }
  }
}

TEST(Lora, AddIsSeededAndStartsAtTheBase) {
  auto ids = at::arange(12, at::kLong).view({2, 6});
  auto model = tiny_model(), twin = tiny_model();
  auto before = logits_of(model, ids);
  dew::nn::add_lora(model, lora(), 7);
  dew::nn::add_lora(twin, lora(), 7);
  // B = 0: the adapted model computes exactly the base model's logits.
  EXPECT_TRUE(at::equal(logits_of(model, ids), before));
  auto a = dew::nn::lora_parameters(*model), b = dew::nn::lora_parameters(*twin);
  for (const auto& [name, p] : a) {
    EXPECT_TRUE(at::equal(p, b.at(name))) << name;
    if (contains(name, "lora_B")) {
      EXPECT_EQ(p.abs().max().item<double>(), 0.0) << name;
    } else {  // peft's kaiming_uniform(a = sqrt(5)): U(-1/sqrt(in), 1/sqrt(in))
      double bound = 1.0 / std::sqrt(static_cast<double>(p.size(1)));
      EXPECT_LE(p.abs().max().item<double>(), bound) << name;
      EXPECT_GT(p.abs().max().item<double>(), 0.8 * bound) << name;
    }
  }
  auto other = tiny_model();
  dew::nn::add_lora(other, lora(), 8);
  EXPECT_FALSE(at::equal(dew::nn::lora_parameters(*other).at("model.layers.0.self_attn.q_proj.lora_A.weight"),
                         a.at("model.layers.0.self_attn.q_proj.lora_A.weight")));
}

TEST(Lora, BadModuleNamesAreNamed) {
  auto model = tiny_model();
  auto message = dew::test::error_of([&] { dew::nn::add_lora(model, lora(4, 8, "q_proj,qproj"), 0); });
  EXPECT_TRUE(contains(message, "lora.modules names 'qproj'")) << message;
  EXPECT_TRUE(contains(message, "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj")) << message;
  EXPECT_FALSE(dew::nn::has_lora(*model));

  auto gelu = tiny_model("gelu");
  message = dew::test::error_of([&] { dew::nn::add_lora(gelu, lora(), 0); });
  EXPECT_TRUE(contains(message, "'gate_proj', which this model does not have")) << message;
  EXPECT_TRUE(contains(message, "q_proj, k_proj, v_proj, o_proj, up_proj, down_proj")) << message;
  EXPECT_EQ(dew::test::error_of([&] { dew::nn::add_lora(gelu, lora(4, 8, "up_proj, down_proj"), 0); }), "(no error)");

  message = dew::test::error_of([&] { lora(4, 8, "q_proj,,v_proj").validate(); });
  EXPECT_TRUE(contains(message, "empty name")) << message;
  message = dew::test::error_of([&] { lora(4, 8, "v_proj,v_proj").validate(); });
  EXPECT_TRUE(contains(message, "'v_proj' twice")) << message;
  message = dew::test::error_of([&] { lora(-1).validate(); });
  EXPECT_TRUE(contains(message, "lora.rank is -1")) << message;
  message = dew::test::error_of([&] { lora(4, 0).validate(); });
  EXPECT_TRUE(contains(message, "lora.alpha")) << message;
  auto high = lora();
  high.dropout = 1.0;
  message = dew::test::error_of([&] { high.validate(); });
  EXPECT_TRUE(contains(message, "lora.dropout")) << message;
  EXPECT_EQ(dew::test::error_of([&] { LoraConfig{}.validate(); }), "(no error)");
  EXPECT_FALSE(LoraConfig{}.enabled());
}

TEST(Lora, DropoutActsOnlyInTraining) {
  auto ids = at::arange(12, at::kLong).view({2, 6});
  auto with_dropout = tiny_model(), without = tiny_model();
  auto dropping = lora();
  dropping.dropout = 0.5;
  dew::nn::add_lora(with_dropout, dropping, 1);
  dew::nn::add_lora(without, lora(), 1);
  randomize_b(with_dropout, 2);
  randomize_b(without, 2);
  with_dropout->eval(), without->eval();
  EXPECT_TRUE(at::equal(logits_of(with_dropout, ids), logits_of(without, ids)));
  with_dropout->train(), without->train();
  EXPECT_TRUE(at::equal(logits_of(without, ids), logits_of(without, ids)));  // no dropout anywhere else
  EXPECT_FALSE(at::equal(logits_of(with_dropout, ids), logits_of(without, ids)));
}

// Generation decodes through the KV cache; the adapters must apply there as in the full forward.
TEST(Lora, KVCacheDecodeApplies) {
  auto model = adapted_model();
  auto ids = reference_ids().narrow(0, 0, 1);
  auto S = ids.size(1);
  auto full = logits_of(model, ids);
  auto cache = dew::nn::KVCache::allocate(model->config(), 1, S, at::kFloat, at::kCPU);
  at::NoGradGuard no_grad;
  auto positions = [](std::int64_t first, std::int64_t count) { return at::arange(first, first + count, at::kLong).unsqueeze(0); };
  cache.span = S - 2;
  model->forward({ids.narrow(1, 0, S - 2), positions(0, S - 2), {}, &cache});
  cache.span = S - 1;
  auto step1 = model->forward({ids.narrow(1, S - 2, 1), positions(S - 2, 1), {}, &cache});
  cache.span = S;
  auto step2 = model->forward({ids.narrow(1, S - 1, 1), positions(S - 1, 1), {}, &cache});
  auto decoded = at::cat({step1, step2}, 1);
  EXPECT_LE(max_diff(decoded, full.narrow(1, S - 2, 2)), fp32_tolerance(full));
  auto expected = reference_logits("adapted").narrow(0, 0, 1).narrow(1, S - 2, 2);
  EXPECT_LE(max_diff(decoded, expected), fp32_tolerance(expected));
}

// Module::to replaces parameter data in place, so the adapters follow the model to another dtype or device.
TEST(Lora, AdaptersFollowTo) {
  auto ids = reference_ids();
  auto model = adapted_model();
  auto before = logits_of(model, ids);
  model->to(at::kDouble);  // compute stays fp32; the fp32 -> fp64 -> fp32 round trip is exact
  for (const auto& [name, p] : dew::nn::lora_parameters(*model)) EXPECT_EQ(p.scalar_type(), at::kDouble) << name;
  EXPECT_TRUE(at::equal(logits_of(model, ids), before));
}

TEST(Lora, PeftDirectoryErrorsAreNamed) {
  dew::test::TempDir tmp;
  auto copy = [&](const std::string& name) {
    auto dir = tmp / name;
    fs::create_directories(dir);
    for (const char* file : {"adapter_config.json", "adapter_model.safetensors"}) fs::copy_file(lora_fixtures() / "adapter" / file, dir / file);
    return dir;
  };
  auto edit_config = [&](const fs::path& dir, const std::string& key, const dew::config::Json& value) {
    auto json = dew::config::parse_json_file(dir / "adapter_config.json");
    json[key] = value;
    dew::test::write_text(dir / "adapter_config.json", json.dump());
  };

  auto dora = copy("dora");
  edit_config(dora, "use_dora", true);
  auto message = dew::test::error_of([&] { dew::interop::read_peft_adapter(dora); });
  EXPECT_TRUE(contains(message, "adapter_config.json' sets use_dora = true")) << message;

  auto regex = copy("regex");
  edit_config(regex, "target_modules", ".*proj");
  message = dew::test::error_of([&] { dew::interop::read_peft_adapter(regex); });
  EXPECT_TRUE(contains(message, "target_modules \".*proj\"")) << message;

  auto head = copy("head");
  edit_config(head, "target_modules", dew::config::Json::array({"q_proj", "lm_head"}));
  // Which modules exist is known with the model (and its family's names): load_peft_adapter refuses, reading leaves it.
  auto headless = base_model();
  message = dew::test::error_of([&] { dew::interop::load_peft_adapter(headless, head); });
  EXPECT_TRUE(contains(message, "'lm_head'")) << message;
  EXPECT_TRUE(contains(message, "stay frozen")) << message;
  EXPECT_FALSE(dew::nn::has_lora(*headless));

  auto missing = copy("missing");
  {
    dew::formats::SafetensorsFile file(missing / "adapter_model.safetensors");
    std::map<std::string, at::Tensor> tensors;
    for (const auto& name : file.names()) tensors[name] = file.load(name);
    tensors.erase("base_model.model.model.layers.1.mlp.up_proj.lora_B.weight");
    dew::formats::save_safetensors(missing / "adapter_model.safetensors", tensors);
  }
  auto model = base_model();
  message = dew::test::error_of([&] { dew::interop::load_peft_adapter(model, missing); });
  EXPECT_TRUE(contains(message, "lacks tensor 'base_model.model.model.layers.1.mlp.up_proj.lora_B.weight'")) << message;
  EXPECT_FALSE(dew::nn::has_lora(*model)) << "a failed load leaves the model as it was";

  dew::interop::load_peft_adapter(model, lora_fixtures() / "adapter");
  message = dew::test::error_of([&] { dew::interop::load_peft_adapter(model, lora_fixtures() / "adapter"); });
  EXPECT_TRUE(contains(message, "already has LoRA adapters")) << message;

  auto plain = base_model();
  message = dew::test::error_of([&] { dew::interop::write_peft_adapter(plain, lora(), "", tmp / "none"); });
  EXPECT_TRUE(contains(message, "has no LoRA adapters")) << message;
  message = dew::test::error_of([&] { dew::interop::write_peft_adapter(model, lora(8, 16), "", tmp / "wrong"); });
  EXPECT_TRUE(contains(message, "has rank 4")) << message;
  EXPECT_FALSE(fs::exists(tmp / "wrong"));
}

// An adapter dew made (not one peft wrote first) on a subset of projections, written as a peft directory: dew reads
// it back to the same logits, and (with DEW_REFERENCE_PYTHON naming a Python with peft) peft loads it onto the base
// model and computes dew's logits (tools/reference/check_peft_export.py, same fp32 tolerance as above).
TEST(Lora, PeftLoadsDewsExport) {
  dew::test::TempDir tmp;
  auto model = base_model();
  auto config = lora(8, 16, "q_proj,v_proj,up_proj,down_proj");
  dew::nn::add_lora(model, config, 21);
  randomize_b(model, 22);
  dew::interop::write_peft_adapter(model, config, "", tmp / "adapter");
  auto ids = reference_ids();
  auto logits = logits_of(model, ids);
  auto again = base_model();
  EXPECT_EQ(dew::interop::load_peft_adapter(again, tmp / "adapter").modules, config.modules);
  EXPECT_TRUE(at::equal(logits_of(again, ids), logits));

  const char* python = std::getenv("DEW_REFERENCE_PYTHON");
  if (!python || !*python) GTEST_SKIP() << "set DEW_REFERENCE_PYTHON to a Python with peft to check the export with it";
  dew::formats::save_safetensors(tmp / "logits.safetensors", {{"ids", ids}, {"logits", logits.contiguous()}});
  auto script = dew::test::fixtures().parent_path().parent_path() / "tools" / "reference" / "check_peft_export.py";
  auto tolerance = dew::str(fp32_tolerance(logits));
  auto result = dew::test::run_command("HF_HUB_OFFLINE=1 '" + std::string(python) + "' '" + script.string() + "' '" +
                                       (lora_fixtures() / "base").string() + "' '" + (tmp / "adapter").string() + "' '" +
                                       (tmp / "logits.safetensors").string() + "' --tolerance " + tolerance + " 2>&1");
  EXPECT_EQ(result.status, 0) << result.output;
  std::cout << "[ peft ] " << result.output;
}

}  // namespace

// AdaptersOff: while it lives the adapted model computes the base's logits bit for bit (the adapter branch
// is skipped, not zeroed), and afterwards the adapted ones again. DPO's and GRPO's reference in a LoRA run.
TEST(Lora, AdaptersOffGivesTheBaseExactly) {
  auto ids = reference_ids();
  auto base = base_model();
  auto model = adapted_model();
  const auto base_logits = logits_of(base, ids), adapted = logits_of(model, ids);
  ASSERT_GT(max_diff(adapted, base_logits), 100 * fp32_tolerance(base_logits));
  {
    dew::nn::AdaptersOff off(model);
    EXPECT_TRUE(at::equal(logits_of(model, ids), base_logits));
  }
  EXPECT_TRUE(at::equal(logits_of(model, ids), adapted));
}

// Under mixed precision (bf16 compute, fp32 parameters) the frozen base weights can be cast once instead of at
// every call: the same casts of the same values, so the logits and the adapters' gradients must not move by a bit.
TEST(Lora, FrozenWeightsInTheComputeDtypeChangeNoBit) {
  auto mixed = [] {
    dew::nn::CausalTransformerConfig config;
    config.vocab_size = 48, config.emb_features = 16, config.num_layers = 2, config.num_heads = 2, config.max_seq_len = 16;
    config.dtype = "bfloat16";  // param_dtype and residual_dtype stay float32
    CausalTransformer model(config);
    model->init_parameters(3);
    dew::nn::add_lora(model, lora(), 7);
    randomize_b(model, 5);
    return model;
  };
  auto as_is = mixed(), cast_once = mixed();
  std::int64_t frozen_linear_bytes = 0;
  for (const auto& [name, p] : dew::nn::parameter_map(*cast_once)) {
    if (contains(name, "_proj.weight") && !contains(name, "lora_")) frozen_linear_bytes += p.numel() * 2;  // 4 -> 2 bytes
  }
  ASSERT_GT(frozen_linear_bytes, 0);
  EXPECT_EQ(dew::nn::store_frozen_weights_in_compute_dtype(cast_once), frozen_linear_bytes);
  for (const auto& [name, p] : dew::nn::parameter_map(*cast_once)) {
    const bool frozen_linear = contains(name, "_proj.weight") && !contains(name, "lora_");
    EXPECT_EQ(p.scalar_type(), frozen_linear ? at::kBFloat16 : at::kFloat) << name;  // embedding, norms, adapters: as they were
  }
  EXPECT_EQ(dew::nn::store_frozen_weights_in_compute_dtype(cast_once), 0);  // nothing wider left

  auto ids = at::arange(20, at::kLong).remainder(48).view({2, 10});
  auto run = [&](CausalTransformer& model) {
    auto logits = model->forward({ids});
    logits.logsumexp(-1).sum().backward();
    return logits.detach();
  };
  EXPECT_TRUE(at::equal(run(as_is), run(cast_once)));
  auto a = dew::nn::lora_parameters(*as_is), b = dew::nn::lora_parameters(*cast_once);
  for (const auto& [name, p] : a) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_TRUE(at::equal(p.grad(), b.at(name).grad())) << name;
  }

  // float32 compute: nothing is narrower to cast to.
  auto fp32 = tiny_model();
  dew::nn::add_lora(fp32, lora(), 7);
  EXPECT_EQ(dew::nn::store_frozen_weights_in_compute_dtype(fp32), 0);
}
