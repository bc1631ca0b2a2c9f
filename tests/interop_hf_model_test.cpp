// load_hf_model's checks (missing, unexpected and mis-shaped tensors, a tied head that differs, sharded
// checkpoints) and save_hf_model's export: dew reads it back bit for bit, and (when DEW_REFERENCE_PYTHON
// names a Python with transformers) transformers reads it and computes dew's logits
// (tools/reference/check_hf_export.py).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstdlib>
#include <fstream>

#include "dew/core/config.h"
#include "dew/formats/safetensors.h"
#include "dew/interop/hf_config.h"
#include "dew/interop/hf_model.h"
#include "dew/nn/parameters.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using dew::interop::load_hf_model;

fs::path family_dir(const std::string& family) { return dew::test::fixtures() / "hf" / family; }

std::map<std::string, at::Tensor> fixture_tensors(const std::string& family) {
  dew::formats::SafetensorsFile file(family_dir(family) / "model.safetensors");
  std::map<std::string, at::Tensor> out;
  for (const auto& name : file.names()) out[name] = file.load(name);
  return out;
}

// A copy of a fixture's config.json with `tensors` as its weights.
fs::path write_checkpoint(const dew::test::TempDir& tmp, const std::string& family, const std::map<std::string, at::Tensor>& tensors) {
  auto dir = tmp / family;
  fs::create_directories(dir);
  fs::copy_file(family_dir(family) / "config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  dew::formats::save_safetensors(dir / "model.safetensors", tensors);
  return dir;
}

std::string load_error(const fs::path& dir) {
  try {
    load_hf_model(dir);
  } catch (const dew::Error& e) {
    return e.what();
  }
  return "(loaded)";
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

TEST(HfModel, MissingTensorIsNamed) {
  dew::test::TempDir tmp;
  auto tensors = fixture_tensors("llama");
  tensors.erase("model.layers.1.self_attn.o_proj.bias");
  auto message = load_error(write_checkpoint(tmp, "llama", tensors));
  EXPECT_TRUE(contains(message, "lacks tensor 'model.layers.1.self_attn.o_proj.bias'")) << message;
}

TEST(HfModel, WrongShapeIsNamed) {
  dew::test::TempDir tmp;
  auto tensors = fixture_tensors("mistral");
  tensors["model.layers.0.mlp.up_proj.weight"] = at::zeros({47, 32});
  auto message = load_error(write_checkpoint(tmp, "mistral", tensors));
  EXPECT_TRUE(contains(message, "model.safetensors' tensor 'model.layers.0.mlp.up_proj.weight' has shape [47, 32]")) << message;
  EXPECT_TRUE(contains(message, "[48, 32]")) << message;
}

TEST(HfModel, UnexpectedTensorIsNamed) {
  dew::test::TempDir tmp;
  auto tensors = fixture_tensors("qwen2");
  tensors["model.layers.4.self_attn.q_proj.weight"] = at::zeros({32, 32});
  auto message = load_error(write_checkpoint(tmp, "qwen2", tensors));
  EXPECT_TRUE(contains(message, "has tensor 'model.layers.4.self_attn.q_proj.weight'")) << message;
  // The rotary buffers older checkpoints store are recomputed, not refused.
  tensors.erase("model.layers.4.self_attn.q_proj.weight");
  tensors["model.layers.0.self_attn.rotary_emb.inv_freq"] = at::ones({4});
  EXPECT_EQ(load_error(write_checkpoint(tmp, "qwen2", tensors)), "(loaded)");
}

TEST(HfModel, TiedHeadCopyIsCheckedAndDropped) {
  dew::test::TempDir tmp;
  auto tensors = fixture_tensors("qwen3");
  tensors["lm_head.weight"] = tensors.at("model.embed_tokens.weight").clone();
  EXPECT_EQ(load_error(write_checkpoint(tmp, "qwen3", tensors)), "(loaded)");
  tensors["lm_head.weight"] = tensors.at("model.embed_tokens.weight") + 1e-3;
  auto message = load_error(write_checkpoint(tmp, "qwen3", tensors));
  EXPECT_TRUE(contains(message, "'lm_head.weight' that differs from 'model.embed_tokens.weight'")) << message;
  EXPECT_TRUE(contains(message, "tie_word_embeddings")) << message;
}

TEST(HfModel, ReadsShardedCheckpointsAndOtherDtypes) {
  dew::test::TempDir tmp;
  auto tensors = fixture_tensors("gemma");
  auto dir = tmp / "sharded";
  fs::create_directories(dir);
  fs::copy_file(family_dir("gemma") / "config.json", dir / "config.json");
  std::map<std::string, at::Tensor> first, second;
  nlohmann::ordered_json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::ordered_json::object()}};
  for (const auto& [name, t] : tensors) {
    bool early = name.find("layers.0.") != std::string::npos || name.find("embed") != std::string::npos;
    (early ? first : second)[name] = t.to(at::kBFloat16);
    index["weight_map"][name] = early ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  dew::formats::save_safetensors(dir / "model-00001-of-00002.safetensors", first);
  dew::formats::save_safetensors(dir / "model-00002-of-00002.safetensors", second);
  dew::test::write_text(dir / "model.safetensors.index.json", index.dump());
  auto loaded = load_hf_model(dir, at::kBFloat16);
  auto params = dew::nn::parameter_map(*loaded.model);
  ASSERT_EQ(params.size(), tensors.size());
  for (const auto& [name, p] : params) {
    EXPECT_EQ(p.scalar_type(), at::kBFloat16);
    EXPECT_TRUE(at::equal(p, tensors.at(name).to(at::kBFloat16))) << name;
  }
  // bf16 compute stays near the fp32 reference (loose: bf16 keeps 8 bits of mantissa).
  dew::formats::SafetensorsFile io(family_dir("gemma") / "io.safetensors");
  at::NoGradGuard no_grad;
  auto logits = loaded.model->forward({io.load("ids")});
  EXPECT_LT((logits - io.load("logits")).abs().max().item<double>(), 0.15);
}

// transformers 5.24 keeps experts grouped in memory (mlp.experts.gate_up_proj [experts, 2F, E], down_proj,
// Mixtral's router as mlp.gate) and reads a checkpoint stored that way as well as the per-expert one
// save_pretrained writes: dew reads both to the same weights.
TEST(HfModel, ReadsExpertsStoredGroupedOrPerExpert) {
  for (const std::string family : {"mixtral", "qwen2_moe"}) {
    dew::test::TempDir tmp;
    auto per_expert = load_hf_model(family_dir(family)).model;
    auto params = dew::nn::parameter_map(*per_expert);
    ASSERT_TRUE(params.count("model.layers.0.mlp.experts.gate_up_proj")) << family;
    std::map<std::string, at::Tensor> grouped;
    for (const auto& [name, p] : params) grouped[name] = p.detach().clone();
    auto reread = dew::nn::parameter_map(*load_hf_model(write_checkpoint(tmp, family, grouped)).model);
    ASSERT_EQ(reread.size(), params.size());
    for (const auto& [name, p] : params) EXPECT_TRUE(at::equal(p, reread.at(name))) << family << " " << name;
    // The per-expert names say which expert and which half of gate_up_proj each is.
    auto stored = fixture_tensors(family);
    const std::string gate = family == "mixtral" ? "model.layers.0.block_sparse_moe.experts.2.w1.weight" : "model.layers.0.mlp.experts.2.gate_proj.weight";
    const std::string up = family == "mixtral" ? "model.layers.0.block_sparse_moe.experts.2.w3.weight" : "model.layers.0.mlp.experts.2.up_proj.weight";
    const auto& gate_up = params.at("model.layers.0.mlp.experts.gate_up_proj");
    const auto F = gate_up.size(1) / 2;
    EXPECT_TRUE(at::equal(gate_up[2].narrow(0, 0, F), stored.at(gate)));
    EXPECT_TRUE(at::equal(gate_up[2].narrow(0, F, F), stored.at(up)));
  }
}

class HfExport : public ::testing::TestWithParam<std::string> {};

// Exports with save_hf_model, reads back with load_hf_model: same config, same tensors, same logits.
// With DEW_REFERENCE_PYTHON, transformers loads the export and must give dew's logits.
TEST_P(HfExport, RoundTripsAndTransformersAgrees) {
  dew::test::TempDir tmp;
  auto family = GetParam();
  dew::nn::CausalTransformer model{nullptr};
  std::string model_type;
  if (family.starts_with("native")) {  // a model dew trained from scratch: its family is chosen from its config
    dew::nn::CausalTransformerConfig config;
    config.vocab_size = 96, config.emb_features = 32, config.num_layers = 2, config.num_heads = 4, config.num_kv_heads = 2;
    config.max_seq_len = 32;
    if (family == "native_moe") config.num_experts = 4, config.expert_features = 16;  // exported as qwen3_moe
    model = dew::nn::CausalTransformer(config);
    model->init_parameters(7);
    model_type = dew::interop::hf_model_type_for(config);
  } else {
    auto loaded = load_hf_model(family_dir(family));  // phi3_longrope is a phi3
    model = loaded.model;
    model_type = loaded.model_type;
  }
  auto dir = tmp / "export";
  dew::interop::HfExportOptions options;
  options.bos_token_id = 1, options.eos_token_id = 2;
  bool sharded = family == "llama";  // ~165 KB of weights in shards of at most 40 KB
  if (sharded) options.max_shard_bytes = 40'000;
  dew::interop::save_hf_model(model, model_type, dir, options);
  for (const char* file : {"config.json", "generation_config.json"}) EXPECT_TRUE(fs::exists(dir / file)) << file;
  EXPECT_EQ(fs::exists(dir / "model.safetensors.index.json"), sharded);
  EXPECT_EQ(fs::exists(dir / "model.safetensors"), !sharded);
  auto written = dew::config::parse_json_file(dir / "config.json");
  EXPECT_EQ(written["model_type"], model_type);
  EXPECT_EQ(written["torch_dtype"], "float32");
  EXPECT_EQ(dew::config::parse_json_file(dir / "generation_config.json")["eos_token_id"], 2);

  auto back = load_hf_model(dir);
  auto resolved = model->config();  // config.json spells out what dew derives
  resolved.head_dim = resolved.resolved_head_dim(), resolved.mlp_features = resolved.resolved_mlp_features();
  EXPECT_EQ(dew::config::to_json(back.model->config()).dump(), dew::config::to_json(resolved).dump());
  auto original = dew::nn::parameter_map(*model);
  auto reread = dew::nn::parameter_map(*back.model);
  ASSERT_EQ(original.size(), reread.size());
  for (const auto& [name, p] : original) EXPECT_TRUE(at::equal(p, reread.at(name))) << name;
  at::NoGradGuard no_grad;
  auto ids = at::arange(3, 3 + 2 * 10, at::kLong).remainder(model->config().vocab_size).view({2, 10});
  auto logits = model->forward({ids});
  EXPECT_TRUE(at::equal(logits, back.model->forward({ids})));

  const char* python = std::getenv("DEW_REFERENCE_PYTHON");
  if (!python || !*python) GTEST_SKIP() << "set DEW_REFERENCE_PYTHON to a Python with transformers to check the export with it";
  dew::formats::save_safetensors(tmp / "logits.safetensors", {{"ids", ids}, {"logits", logits.contiguous()}});
  auto script = dew::test::fixtures().parent_path().parent_path() / "tools" / "reference" / "check_hf_export.py";
  auto result = dew::test::run_command("HF_HUB_OFFLINE=1 '" + std::string(python) + "' '" + script.string() + "' '" +
                                       dir.string() + "' '" + (tmp / "logits.safetensors").string() + "' 2>&1");
  EXPECT_EQ(result.status, 0) << result.output;
  std::cout << "[ transformers ] " << family << ": " << result.output;
}

INSTANTIATE_TEST_SUITE_P(Families, HfExport,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "gpt2",
                                           "gpt_neox", "phi3", "phi3_longrope", "olmo2", "granite", "mixtral", "qwen2_moe",
                                           "qwen3_moe", "native", "native_moe"));

}  // namespace
