// config.json translation both ways: the older spellings, refusals by field name, and the round trip
// config_from_hf(config_to_hf(c)) == c for every family's fixture config.
#include <gtest/gtest.h>

#include "dew/core/config.h"
#include "dew/interop/hf_config.h"
#include "test_support.h"

namespace {

using dew::interop::config_from_hf;
using dew::interop::config_to_hf;
using Json = nlohmann::ordered_json;

Json fixture_config(const std::string& family) {
  return dew::config::parse_json_file(dew::test::fixtures() / "hf" / family / "config.json");
}

Json tiny(const std::string& model_type) {
  return Json{{"model_type", model_type}, {"vocab_size", 64},          {"hidden_size", 32},
              {"num_hidden_layers", 2},   {"num_attention_heads", 4},  {"num_key_value_heads", 2},
              {"intermediate_size", 48},  {"max_position_embeddings", 64}};
}

// Expects config_from_hf to refuse `config`, with every one of `needles` in the message.
void expect_refused(const Json& config, std::initializer_list<std::string> needles) {
  try {
    config_from_hf(config, "cfg.json");
    ADD_FAILURE() << "accepted " << config.dump();
  } catch (const dew::Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("cfg.json"), std::string::npos) << message;
    for (const auto& needle : needles) EXPECT_NE(message.find(needle), std::string::npos) << message << " lacks " << needle;
  }
}

TEST(HfConfig, OlderSpellingsTranslate) {
  auto llama = tiny("llama");
  llama["rope_theta"] = 500000.0;
  llama["rope_scaling"] = {{"type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                           {"original_max_position_embeddings", 8192}};
  llama["pretraining_tp"] = 1;         // transformers ignores it
  llama["some_future_field"] = "x";    // so are fields transformers does not read
  auto c = config_from_hf(llama, "cfg.json");
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.tie_embeddings);

  auto gemma3 = tiny("gemma3_text");
  gemma3["num_hidden_layers"] = 6;
  gemma3["rope_theta"] = 1000000.0;
  gemma3["rope_local_base_freq"] = 10000.0;
  gemma3["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  gemma3["sliding_window"] = 512;
  gemma3["sliding_window_pattern"] = 3;
  c = config_from_hf(gemma3, "cfg.json");
  EXPECT_EQ(c.window_of_layer(0), 512);
  EXPECT_EQ(c.window_of_layer(2), 0);  // every third layer is global
  EXPECT_EQ(c.window_of_layer(5), 0);
  EXPECT_EQ(c.kind_rope_theta_of_layer(0), 10000.0);
  EXPECT_EQ(c.rope_theta, 1000000.0);
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_TRUE(c.qk_norm && c.sandwich_norms);
  EXPECT_EQ(c.query_pre_attn_scalar, 256.0);

  auto gemma = tiny("gemma");
  gemma["hidden_act"] = "gelu";  // the official releases' legacy value, meaning the tanh approximation
  EXPECT_EQ(config_from_hf(gemma, "cfg.json").mlp, "geglu");

  auto qwen2 = tiny("qwen2");
  qwen2["sliding_window"] = 4;  // without use_sliding_window transformers ignores it
  c = config_from_hf(qwen2, "cfg.json");
  EXPECT_EQ(c.window_of_layer(1), 0);
  EXPECT_TRUE(c.attention_bias && !c.attention_output_bias);
}

TEST(HfConfig, RefusesWhatDewCannotCompute) {
  auto with = [](Json j, const std::string& key, Json value) {
    j[key] = std::move(value);
    return j;
  };
  expect_refused(tiny("falcon"), {"model_type", "falcon"});
  expect_refused(with(tiny("llama"), "rope_scaling", {{"rope_type", "dynamic"}, {"factor", 2.0}}), {"rope_scaling.rope_type", "dynamic"});
  expect_refused(with(tiny("llama"), "rope_parameters", {{"rope_type", "yarn"}, {"rope_theta", 1e4}, {"factor", 4.0}}),
                 {"rope_parameters.rope_type", "yarn"});
  expect_refused(with(tiny("llama"), "hidden_act", "relu"), {"hidden_act", "relu"});
  expect_refused(with(tiny("gemma2"), "hidden_activation", "gelu"), {"hidden_activation", "gelu"});
  expect_refused(with(tiny("mistral"), "attention_dropout", 0.1), {"attention_dropout", "0.1"});
  expect_refused(with(tiny("qwen2"), "quantization_config", {{"quant_method", "gptq"}}), {"quantization_config", "gptq"});
  expect_refused(with(tiny("llama"), "partial_rotary_factor", 0.5), {"partial_rotary_factor", "0.5"});
  expect_refused(with(tiny("gemma3_text"), "use_bidirectional_attention", true), {"use_bidirectional_attention"});
  expect_refused(with(with(tiny("qwen3"), "use_sliding_window", true), "layer_types", {"full_attention", "chunked_attention"}),
                 {"layer_types", "chunked_attention"});
  expect_refused(with(tiny("llama"), "num_attention_heads", 5), {"num_heads"});
  auto no_vocab = tiny("llama");
  no_vocab.erase("vocab_size");
  expect_refused(no_vocab, {"vocab_size"});
  expect_refused(with(tiny("llama"), "vocab_size", "many"), {"vocab_size", "many"});
}

class HfConfigRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(HfConfigRoundTrip, ToHfAndBackIsTheSameConfig) {
  auto c = config_from_hf(fixture_config(GetParam()), "cfg.json");
  auto hf = config_to_hf(c, GetParam());
  EXPECT_EQ(hf["model_type"], GetParam());
  EXPECT_EQ(dew::interop::hf_model_type_for(c), GetParam());
  auto back = config_from_hf(hf, "exported");
  EXPECT_EQ(dew::config::to_json(back).dump(), dew::config::to_json(c).dump());
}

INSTANTIATE_TEST_SUITE_P(Families, HfConfigRoundTrip,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text"));

void expect_export_refused(const dew::nn::CausalTransformerConfig& c, const std::string& model_type, const std::string& field) {
  try {
    config_to_hf(c, model_type);
    ADD_FAILURE() << "exported as " << model_type;
  } catch (const dew::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model." + field), std::string::npos) << e.what();
  }
}

TEST(HfConfig, ExportRefusesWhatTheFamilyCannotExpress) {
  dew::nn::CausalTransformerConfig native;
  native.vocab_size = 64;  // dew's defaults: q/k norm, tied: a Qwen3
  EXPECT_EQ(dew::interop::hf_model_type_for(native), "qwen3");
  expect_export_refused(native, "llama", "qk_norm");
  native.qk_norm = false;
  EXPECT_EQ(dew::interop::hf_model_type_for(native), "llama");
  auto gelu = native;
  gelu.mlp = "gelu";
  expect_export_refused(gelu, "llama", "mlp");
  auto sliding = native;
  sliding.layer_types = {"local", "full_attention", "local", "full_attention"};
  sliding.kinds["local"] = {8};
  expect_export_refused(sliding, "llama", "kinds");
  expect_export_refused(sliding, "mistral", "layer_types");
  expect_export_refused(sliding, "qwen2", "attention_bias");
  sliding.qk_norm = true;
  expect_export_refused(sliding, "qwen3", "layer_types");  // qwen slides on the last layers only
  sliding.layer_types = {"full_attention", "full_attention", "local", "local"};
  EXPECT_EQ(config_to_hf(sliding, "qwen3")["max_window_layers"], 2);
  auto softcapped = native;
  softcapped.final_logit_softcap = 30;
  expect_export_refused(softcapped, "llama", "final_logit_softcap");
  auto bidirectional = native;
  bidirectional.causal = false;
  expect_export_refused(bidirectional, "llama", "causal");
  EXPECT_THROW(config_to_hf(native, "falcon"), dew::Error);
  // The wider families refuse what their blocks cannot express, by dew field.
  expect_export_refused(native, "gpt2", "positions");   // rotary; GPT-2 learns absolute positions
  expect_export_refused(native, "olmo2", "pre_norms");  // OLMo 2 norms only after each sublayer
  auto post_norms = native;
  post_norms.sandwich_norms = true, post_norms.pre_norms = false;
  expect_export_refused(post_norms, "llama", "pre_norms");
  auto multiplied = native;
  multiplied.qk_norm = false, multiplied.residual_multiplier = 0.5;
  expect_export_refused(multiplied, "llama", "residual_multiplier");
  EXPECT_EQ(config_to_hf(multiplied, "granite")["residual_multiplier"], 0.5);
  auto partial = native;
  partial.qk_norm = false, partial.rotary_dim = 32;
  expect_export_refused(partial, "llama", "rotary_dim");
  EXPECT_EQ(config_to_hf(partial, "phi3")["partial_rotary_factor"], 0.5);  // 32 of 256 / 4 heads = 64 features
}

}  // namespace

namespace {

// The mixture-of-experts families: their fields both ways, and what each refuses by name.
TEST(HfConfig, MixtureOfExpertsFieldsReadWriteAndRefuse) {
  auto with = [](Json j, const std::string& key, Json value) {
    j[key] = std::move(value);
    return j;
  };
  for (const std::string family : {"mixtral", "qwen2_moe", "qwen3_moe"}) {
    auto c = config_from_hf(fixture_config(family), "cfg.json");
    auto hf = config_to_hf(c, family);
    EXPECT_EQ(dew::interop::hf_model_type_for(c), family);
    EXPECT_EQ(dew::config::to_json(config_from_hf(hf, "exported")).dump(), dew::config::to_json(c).dump()) << family;
  }
  expect_refused(with(fixture_config("mixtral"), "router_jitter_noise", 0.01), {"router_jitter_noise", "0.01"});
  expect_refused(with(fixture_config("qwen3_moe"), "use_sliding_window", true), {"use_sliding_window"});
  expect_refused(with(fixture_config("qwen2_moe"), "mlp_only_layers", Json::array({7})), {"mlp_only_layers", "7"});
  expect_refused(with(fixture_config("qwen2_moe"), "shared_expert_intermediate_size", 0), {"shared_expert_intermediate_size"});
  expect_refused(with(fixture_config("qwen3_moe"), "num_experts_per_tok", 9), {"experts_per_token"});
  // output_router_logits is inert: the same config with or without it.
  EXPECT_EQ(dew::config::to_json(config_from_hf(with(fixture_config("mixtral"), "output_router_logits", true), "c")).dump(),
            dew::config::to_json(config_from_hf(fixture_config("mixtral"), "c")).dump());

  auto moe = config_from_hf(fixture_config("qwen2_moe"), "cfg.json");
  expect_export_refused(moe, "llama", "num_experts");  // a dense family
  moe.attention_bias = false;                            // what mixtral's and qwen3_moe's attention can hold
  expect_export_refused(moe, "mixtral", "norm_topk_prob");
  moe.norm_topk_prob = true;
  expect_export_refused(moe, "mixtral", "shared_expert_features");
  moe.qk_norm = true;
  expect_export_refused(moe, "qwen3_moe", "shared_expert_features");
  auto dense = config_from_hf(fixture_config("qwen3"), "cfg.json");
  expect_export_refused(dense, "qwen3_moe", "num_experts");
}

}  // namespace
