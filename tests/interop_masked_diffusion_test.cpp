// LLaDA and Dream (masked-diffusion LMs) as Hugging Face checkpoints: config.json in each release's own
// spelling, LLaDA's tensor names, logits against the reference (tools/reference/make_masked_diffusion_fixtures.py:
// transformers' Llama / Qwen2 with an all-visible attention mask, which is what modeling_llada.py /
// modeling_dream.py compute), refusals by name, the export round trip and the family a native model exports as.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <iostream>
#include <set>

#include "dew/core/config.h"
#include "dew/formats/safetensors.h"
#include "dew/interop/hf_config.h"
#include "dew/interop/hf_llada.h"
#include "dew/interop/hf_model.h"
#include "dew/nn/parameters.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using dew::interop::config_from_hf;
using dew::interop::config_to_hf;
using dew::interop::load_hf_model;
using dew::test::error_of;
using Json = nlohmann::ordered_json;

constexpr std::int64_t kMaskId = 126;  // the fixtures' mask token (vocabulary 128)

fs::path family_dir(const std::string& family) { return dew::test::fixtures() / "hf" / family; }
Json fixture_config(const std::string& family) { return dew::config::parse_json_file(family_dir(family) / "config.json"); }

std::set<std::string> tensor_names(const fs::path& file) {
  auto names = dew::formats::SafetensorsFile(file).names();
  return {names.begin(), names.end()};
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

// config_from_hf's error for `config`, which must name the file and every one of `needles`.
void expect_refused(const Json& config, std::initializer_list<std::string> needles) {
  auto message = error_of([&] { config_from_hf(config, "cfg.json"); });
  EXPECT_TRUE(contains(message, "cfg.json")) << message;
  for (const auto& needle : needles) EXPECT_TRUE(contains(message, needle)) << message << " lacks " << needle;
}

void expect_export_refused(const dew::nn::CausalTransformerConfig& c, const std::string& model_type, const std::string& field) {
  auto message = error_of([&] { config_to_hf(c, model_type); });
  EXPECT_TRUE(contains(message, "cannot export as " + model_type)) << message;
  EXPECT_TRUE(contains(message, "model." + field)) << message;
}

Json with(Json j, const std::string& key, Json value) {
  j[key] = std::move(value);
  return j;
}
Json without(Json j, const std::string& key) {
  j.erase(key);
  return j;
}

class HfMaskedDiffusion : public ::testing::TestWithParam<std::string> {};

// Tolerance 1e-5: both sides compute in float32 on a 2-layer, width-32 model whose logits are of order 2, so
// they differ only by rounding (6e-7 measured); the same weights under a causal mask are more than 0.1 off
// (checked below), so the bound tells the two apart with room to spare.
TEST_P(HfMaskedDiffusion, LogitsMatchTheBidirectionalReference) {
  auto loaded = load_hf_model(family_dir(GetParam()));
  EXPECT_EQ(loaded.model_type, GetParam());
  const auto& config = loaded.model->config();
  EXPECT_FALSE(config.causal);
  EXPECT_EQ(config.mask_token_id, kMaskId);
  EXPECT_EQ(config.shift_logits, GetParam() == "dream");  // Dream predicts token i + 1 at position i
  dew::formats::SafetensorsFile io(family_dir(GetParam()) / "io.safetensors");
  at::NoGradGuard no_grad;
  auto ids = io.load("ids");
  auto logits = loaded.model->forward({ids});
  auto expected = io.load("logits");
  auto difference = (logits - expected).abs().max().item<double>();
  EXPECT_LT(difference, 1e-5);
  std::cout << "[ reference ] " << GetParam() << ": max |reference - dew| = " << difference << "\n";

  // The same weights with a causal mask are far off: the reference really is bidirectional.
  auto causal_config = config;
  causal_config.causal = true, causal_config.mask_token_id = -1, causal_config.shift_logits = false;
  dew::nn::CausalTransformer causal(causal_config, dew::nn::ParameterInit::none);
  auto causal_params = dew::nn::parameter_map(*causal);
  for (const auto& [name, p] : dew::nn::parameter_map(*loaded.model)) causal_params.at(name).copy_(p);
  EXPECT_GT((causal->forward({ids}) - expected).abs().max().item<double>(), 0.1);

  // Bidirectional for real: the last token reaches the first position.
  auto changed = ids.clone();
  changed.select(1, ids.size(1) - 1).fill_(5);
  auto moved = (loaded.model->forward({changed}).select(1, 0) - logits.select(1, 0)).abs().max().item<double>();
  EXPECT_GT(moved, 1e-3);
}

// load -> save -> load: the release's tensor names and config.json spelling, identical tensors and config.
TEST_P(HfMaskedDiffusion, ExportRoundTripsInTheReleaseLayout) {
  dew::test::TempDir tmp;
  const auto family = GetParam();
  auto loaded = load_hf_model(family_dir(family));
  EXPECT_EQ(dew::interop::hf_model_type_for(loaded.model->config()), family);
  auto dir = tmp / "export";
  dew::interop::HfExportOptions options;
  options.eos_token_id = 2;
  dew::interop::save_hf_model(loaded.model, family, dir, options);

  // The same tensor names as the release layout the fixture was written in (LLaDA's, or Qwen2's for Dream).
  EXPECT_EQ(tensor_names(dir / "model.safetensors"), tensor_names(family_dir(family) / "model.safetensors"));
  auto written = dew::config::parse_json_file(dir / "config.json");
  auto original = fixture_config(family);
  for (const char* key : {"model_type", "architectures", "mask_token_id", "vocab_size", "rms_norm_eps", "rope_theta"}) {
    EXPECT_EQ(written[key], original[key]) << key;
  }
  if (family == "llada") {
    for (const char* key : {"d_model", "n_layers", "n_heads", "n_kv_heads", "mlp_hidden_size", "embedding_size",
                            "max_sequence_length", "weight_tying", "block_type", "rope", "layer_norm_type", "activation_type"}) {
      EXPECT_EQ(written[key], original[key]) << key;
    }
  } else {
    EXPECT_EQ(written["model_type"], "Dream");
    EXPECT_EQ(written["use_sliding_window"], false);
    EXPECT_FALSE(written.contains("head_dim"));  // Dream derives it
  }

  auto back = load_hf_model(dir);
  EXPECT_EQ(back.model_type, family);
  EXPECT_EQ(dew::config::to_json(back.model->config()).dump(), dew::config::to_json(loaded.model->config()).dump());
  auto before = dew::nn::parameter_map(*loaded.model), after = dew::nn::parameter_map(*back.model);
  ASSERT_EQ(before.size(), after.size());
  for (const auto& [name, p] : before) EXPECT_TRUE(at::equal(p, after.at(name))) << name;
}

INSTANTIATE_TEST_SUITE_P(Families, HfMaskedDiffusion, ::testing::Values("llada", "dream"));

TEST(HfMaskedDiffusionConfig, ReadsEachReleasesSpelling) {
  auto llada = config_from_hf(fixture_config("llada"), "cfg.json");
  EXPECT_EQ(llada.emb_features, 32);
  EXPECT_EQ(llada.num_layers, 2);
  EXPECT_EQ(llada.num_heads, 4);
  EXPECT_EQ(llada.num_kv_heads, 2);
  EXPECT_EQ(llada.head_dim, 8);
  EXPECT_EQ(llada.mlp_features, 48);
  EXPECT_EQ(llada.max_seq_len, 64);
  EXPECT_EQ(llada.rope_theta, 500000.0);
  EXPECT_EQ(llada.norm_eps, 1e-5);
  EXPECT_EQ(llada.mlp, "swiglu");
  EXPECT_FALSE(llada.tie_embeddings || llada.qk_norm || llada.attention_bias || llada.attention_output_bias || llada.causal);
  EXPECT_EQ(llada.mask_token_id, kMaskId);

  auto dream = config_from_hf(fixture_config("dream"), "cfg.json");
  EXPECT_TRUE(dream.attention_bias);
  EXPECT_FALSE(dream.attention_output_bias || dream.qk_norm || dream.tie_embeddings || dream.causal);
  EXPECT_EQ(dream.rope_theta, 1000000.0);
  EXPECT_EQ(dream.mask_token_id, kMaskId);
  EXPECT_EQ(dream.window_of_layer(1), 0);
  // The lower-case spelling and the mask_id spelling are read too.
  auto lower = with(without(fixture_config("dream"), "mask_token_id"), "model_type", "dream");
  EXPECT_EQ(config_from_hf(with(lower, "mask_id", 7), "cfg.json").mask_token_id, 7);

  // transformers' names for LLaDA's sizes, as conversions write them; both spellings must then agree.
  Json hf_spelled = fixture_config("llada");
  for (auto [llada_key, hf_key] : {std::pair{"d_model", "hidden_size"}, {"n_layers", "num_hidden_layers"},
                                   {"n_heads", "num_attention_heads"}, {"n_kv_heads", "num_key_value_heads"},
                                   {"mlp_hidden_size", "intermediate_size"}, {"max_sequence_length", "max_position_embeddings"}}) {
    hf_spelled[hf_key] = hf_spelled[llada_key];
    hf_spelled.erase(llada_key);
  }
  EXPECT_EQ(dew::config::to_json(config_from_hf(hf_spelled, "cfg.json")).dump(), dew::config::to_json(llada).dump());
  expect_refused(with(fixture_config("llada"), "hidden_size", 64), {"d_model", "hidden_size", "64"});

  // Training-only fields are ignored: dropouts, init, precision, flash attention.
  auto training = fixture_config("llada");
  for (auto [key, value] : {std::pair{"attention_dropout", Json(0.1)}, {"residual_dropout", Json(0.1)},
                            {"embedding_dropout", Json(0.1)}, {"flash_attention", Json(true)}, {"init_fn", Json("normal")},
                            {"precision", Json("fp32")}, {"init_device", Json("cuda")}}) {
    training[key] = value;
  }
  EXPECT_EQ(dew::config::to_json(config_from_hf(training, "cfg.json")).dump(), dew::config::to_json(llada).dump());
}

TEST(HfMaskedDiffusionConfig, RefusesWhatDewCannotComputeByName) {
  const auto llada = fixture_config("llada"), dream = fixture_config("dream");
  expect_refused(without(llada, "mask_token_id"), {"mask_token_id", "LLaDA"});
  expect_refused(without(dream, "mask_token_id"), {"mask_token_id", "Dream"});
  expect_refused(with(llada, "mask_token_id", 128), {"mask_token_id", "128", "[0, 128)"});
  expect_refused(with(llada, "alibi", true), {"alibi", "true"});
  expect_refused(with(llada, "rope", false), {"rope", "false"});
  expect_refused(without(llada, "rope"), {"rope", "LLaDAConfig's default"});
  expect_refused(without(llada, "block_type"), {"block_type", "sequential"});
  expect_refused(with(llada, "layer_norm_type", "default"), {"layer_norm_type", "default"});
  expect_refused(with(llada, "layer_norm_with_affine", false), {"layer_norm_with_affine"});
  expect_refused(with(llada, "attention_layer_norm", true), {"attention_layer_norm"});
  expect_refused(with(llada, "bias_for_layer_norm", true), {"bias_for_layer_norm"});
  expect_refused(with(llada, "include_bias", true), {"include_bias"});
  expect_refused(with(llada, "include_qkv_bias", true), {"include_qkv_bias"});
  expect_refused(with(llada, "input_emb_norm", true), {"input_emb_norm"});
  expect_refused(with(llada, "scale_logits", true), {"scale_logits"});
  expect_refused(with(llada, "multi_query_attention", true), {"multi_query_attention"});
  expect_refused(with(llada, "block_group_size", 2), {"block_group_size", "2"});
  expect_refused(with(llada, "embedding_size", 256), {"embedding_size", "256", "vocab_size"});
  expect_refused(with(llada, "activation_type", "swiglu"), {"activation_type", "swiglu"});
  expect_refused(with(llada, "rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}), {"rope_scaling"});
  expect_refused(with(llada, "sliding_window", 4), {"sliding_window"});
  expect_refused(with(llada, "n_heads", 3), {"d_model", "n_heads"});
  expect_refused(with(dream, "use_mrope", true), {"use_mrope"});
  expect_refused(with(dream, "use_sliding_window", true), {"use_sliding_window"});
  expect_refused(with(dream, "head_dim", 16), {"head_dim", "16"});
  expect_refused(with(dream, "attention_dropout", 0.1), {"attention_dropout"});
}

TEST(HfMaskedDiffusionConfig, ExportChoosesAndChecksTheFamily) {
  dew::nn::CausalTransformerConfig c;
  c.vocab_size = 96, c.emb_features = 32, c.num_layers = 2, c.num_heads = 4, c.num_kv_heads = 2, c.max_seq_len = 32;
  c.qk_norm = false;
  EXPECT_EQ(dew::interop::hf_model_type_for(c), "llama");
  expect_export_refused(c, "llada", "causal");
  expect_export_refused(c, "dream", "causal");

  auto bidirectional = c;
  bidirectional.causal = false;
  EXPECT_EQ(dew::interop::hf_model_type_for(bidirectional), "llada");
  expect_export_refused(bidirectional, "llada", "mask_token_id");  // no mask id: not a masked-diffusion model
  expect_export_refused(bidirectional, "dream", "mask_token_id");
  expect_export_refused(bidirectional, "llama", "causal");          // causal families stay causal
  expect_export_refused(bidirectional, "qwen2", "causal");

  auto masked = bidirectional;
  masked.mask_token_id = 95;
  auto hf = config_to_hf(masked, "llada");
  EXPECT_EQ(hf["model_type"], "llada");
  EXPECT_EQ(hf["mask_token_id"], 95);
  expect_export_refused(masked, "dream", "shift_logits");  // Dream predicts the next position (and has q/k/v biases)
  expect_export_refused(masked, "llama", "causal");
  auto with_qk_norm = masked;
  with_qk_norm.qk_norm = true;  // dew's default; LLaDA has no q/k norms
  expect_export_refused(with_qk_norm, "llada", "qk_norm");
  auto scaled = masked;
  scaled.rope_scaling.type = "linear";
  expect_export_refused(scaled, "llada", "rope_scaling.type");

  auto qwen_like = masked;
  qwen_like.attention_bias = true;
  expect_export_refused(qwen_like, "dream", "shift_logits");  // Dream's alignment is part of what it computes
  qwen_like.shift_logits = true;
  EXPECT_EQ(dew::interop::hf_model_type_for(qwen_like), "dream");
  expect_export_refused(qwen_like, "llada", "shift_logits");
  qwen_like.shift_logits = false;
  expect_export_refused(qwen_like, "llada", "attention_bias");
  qwen_like.shift_logits = true;
  for (const std::string spelling : {"dream", "Dream"}) {
    hf = config_to_hf(qwen_like, spelling);
    EXPECT_EQ(hf["model_type"], "Dream");
    EXPECT_EQ(hf["architectures"][0], "DreamModel");
    EXPECT_EQ(hf["mask_token_id"], 95);
  }
  auto resolved = qwen_like;  // config.json spells out what dew derives
  resolved.head_dim = 8, resolved.mlp_features = 128;
  EXPECT_EQ(dew::config::to_json(config_from_hf(hf, "exported")).dump(), dew::config::to_json(resolved).dump());
}

// A native dew model (tied embeddings, as dew defaults) exported as LLaDA: weight_tying true, no head tensor,
// read back bit for bit.
TEST(HfMaskedDiffusionConfig, NativeTiedModelRoundTripsAsLlada) {
  dew::test::TempDir tmp;
  dew::nn::CausalTransformerConfig c;
  c.vocab_size = 96, c.emb_features = 32, c.num_layers = 2, c.num_heads = 4, c.num_kv_heads = 2, c.max_seq_len = 32;
  c.qk_norm = false, c.causal = false, c.mask_token_id = 95;
  dew::nn::CausalTransformer model(c);
  model->init_parameters(3);
  auto type = dew::interop::hf_model_type_for(c);
  ASSERT_EQ(type, "llada");
  dew::interop::save_hf_model(model, type, tmp / "export");
  auto names = tensor_names(tmp / "export" / "model.safetensors");
  EXPECT_EQ(names.count("model.transformer.wte.weight"), 1u);
  EXPECT_EQ(names.count("model.transformer.blocks.1.ff_out.weight"), 1u);
  EXPECT_EQ(names.count("model.transformer.ff_out.weight"), 0u);  // tied: no head of its own
  EXPECT_EQ(dew::config::parse_json_file(tmp / "export" / "config.json")["weight_tying"], true);
  auto back = load_hf_model(tmp / "export");
  auto resolved = c;
  resolved.head_dim = 8, resolved.mlp_features = 128;
  EXPECT_EQ(dew::config::to_json(back.model->config()).dump(), dew::config::to_json(resolved).dump());
  auto before = dew::nn::parameter_map(*model), after = dew::nn::parameter_map(*back.model);
  ASSERT_EQ(before.size(), after.size());
  for (const auto& [name, p] : before) EXPECT_TRUE(at::equal(p, after.at(name))) << name;
}

TEST(HfMaskedDiffusionWeights, LladaNamesMapBothWaysAndErrorsNameTheStoredTensor) {
  using dew::interop::dew_tensor_name_from_llada;
  using dew::interop::llada_tensor_name;
  EXPECT_EQ(llada_tensor_name("lm_head.weight"), "model.transformer.ff_out.weight");
  EXPECT_EQ(llada_tensor_name("model.layers.11.mlp.down_proj.weight"), "model.transformer.blocks.11.ff_out.weight");
  EXPECT_EQ(llada_tensor_name("model.layers.0.self_attn.o_proj.weight"), "model.transformer.blocks.0.attn_out.weight");
  EXPECT_EQ(dew_tensor_name_from_llada("model.transformer.ff_out.weight"), "lm_head.weight");
  EXPECT_EQ(dew_tensor_name_from_llada("model.transformer.blocks.3.ff_proj.weight"), "model.layers.3.mlp.gate_proj.weight");
  EXPECT_EQ(dew_tensor_name_from_llada("model.transformer.blocks.3.att_proj.weight"), std::nullopt);
  EXPECT_EQ(dew_tensor_name_from_llada("model.transformer.wpe.weight"), std::nullopt);

  dew::test::TempDir tmp;
  dew::formats::SafetensorsFile file(family_dir("llada") / "model.safetensors");
  std::map<std::string, at::Tensor> tensors;
  for (const auto& name : file.names()) tensors[name] = file.load(name);
  auto write = [&](const std::map<std::string, at::Tensor>& t) {
    auto dir = tmp / "llada";
    fs::create_directories(dir);
    fs::copy_file(family_dir("llada") / "config.json", dir / "config.json", fs::copy_options::overwrite_existing);
    dew::formats::save_safetensors(dir / "model.safetensors", t);
    return dir;
  };
  auto missing = tensors;
  missing.erase("model.transformer.blocks.1.ff_out.weight");
  auto message = error_of([&] { load_hf_model(write(missing)); });
  EXPECT_TRUE(contains(message, "lacks tensor 'model.transformer.blocks.1.ff_out.weight'")) << message;
  auto extra = tensors;
  extra["model.transformer.wpe.weight"] = at::zeros({64, 32});
  message = error_of([&] { load_hf_model(write(extra)); });
  EXPECT_TRUE(contains(message, "has tensor 'model.transformer.wpe.weight'")) << message;
  auto mis_shaped = tensors;
  mis_shaped["model.transformer.blocks.0.up_proj.weight"] = at::zeros({47, 32});
  message = error_of([&] { load_hf_model(write(mis_shaped)); });
  EXPECT_TRUE(contains(message, "'model.transformer.blocks.0.up_proj.weight' has shape [47, 32]")) << message;
}

}  // namespace
