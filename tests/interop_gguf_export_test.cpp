// save_gguf_model: the tiny llama / qwen2 / qwen3 GGUF fixtures (tests/fixtures/smollm2/tiny, written as
// llama.cpp's converter writes them) loaded, exported as F32, F16 and Q8_0 and loaded back: F32 gives the
// same weights (and llama's permuted Q/K rows byte for byte as the fixture stores them) and the same logits,
// F16/Q8_0 logits within stated tolerances; the tokenizer gives the same ids, special tokens, stop ids and
// chat rendering; llama.cpp's metadata keys and tensor types are there; models and tokenizers GGUF cannot
// express are refused by field. With DEW_REFERENCE_PYTHON, tools/reference/check_gguf_export.py reads the
// export with gguf-py and transformers. With the real SmolLM2 GGUF present: F16 and Q8_0 export and reload.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "dew/core/atomic_file.h"
#include "dew/core/config.h"
#include "dew/core/error.h"
#include "dew/data/tokenizers/byte_tokenizer.h"
#include "dew/data/tokenizers/gguf_tokenizer.h"
#include "dew/data/tokenizers/tokenizer.h"
#include "dew/formats/gguf.h"
#include "dew/formats/gguf_writer.h"
#include "dew/formats/safetensors.h"
#include "dew/interop/gguf_export.h"
#include "dew/interop/gguf_model.h"
#include "dew/interop/hf_model.h"
#include "dew/nn/parameters.h"
#include "test_support.h"

using dew::test::error_of;

namespace dew::interop {
namespace {
namespace fs = std::filesystem;
using formats::GgmlType;
using nlohmann::json;
using Ids = std::vector<std::int32_t>;

fs::path tiny_dir() { return test::fixtures() / "smollm2" / "tiny"; }
json read_json(const fs::path& path) { return json::parse(read_file(path)); }

at::Tensor logits_of(GgufModel& m, const Ids& ids) {
  at::NoGradGuard no_grad;
  auto input = at::tensor(std::vector<std::int64_t>(ids.begin(), ids.end()), at::kLong).unsqueeze(0);
  return m.model->forward({.ids = input})[0];
}

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

class TinyGgufExport : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyGgufExport, RoundTripsThroughF32F16AndQ8_0) {
  const std::string arch = GetParam();
  const json f = read_json(tiny_dir() / (arch + ".json"));
  const fs::path original_path = tiny_dir() / (arch + ".gguf");
  GgufModel m = load_gguf_model(original_path);
  const Ids ids = f["ids"].get<Ids>();
  const at::Tensor logits = logits_of(m, ids);
  test::TempDir dir;

  // F32: the same parameters, bit for bit, and the same logits.
  fs::path f32 = dir / "f32.gguf";
  save_gguf_model(m.model, m.tokenizer, arch, f32, GgmlType::F32, {.name = "tiny-" + arch});
  GgufModel back = load_gguf_model(f32);
  EXPECT_EQ(back.architecture, arch);
  const auto& c = m.model->config();
  const auto& b = back.model->config();
  EXPECT_EQ(config::to_json(b).dump(), config::to_json(c).dump());
  auto original = nn::parameter_map(*m.model), reread = nn::parameter_map(*back.model);
  ASSERT_EQ(original.size(), reread.size());
  for (const auto& [name, p] : original) EXPECT_TRUE(at::equal(p, reread.at(name))) << name;
  EXPECT_TRUE(at::equal(logits, logits_of(back, ids)));

  // The stored (permuted for llama) tensors are the ones llama.cpp's converter wrote in the fixture.
  formats::GgufFile written(f32), fixture(original_path);
  for (const auto& info : fixture.tensors())
    EXPECT_TRUE(at::equal(formats::gguf_tensor(written, info.name, at::kFloat),
                          formats::gguf_tensor(fixture, info.name, at::kFloat)))
        << info.name;

  // Metadata llama.cpp reads.
  for (const char* suffix : {"vocab_size", "context_length", "embedding_length", "block_count", "feed_forward_length",
                             "attention.head_count", "attention.head_count_kv", "rope.freq_base",
                             "attention.layer_norm_rms_epsilon"})
    EXPECT_NE(written.find(arch + "." + suffix), nullptr) << suffix;
  for (const char* key : {"general.architecture", "general.name", "general.file_type", "tokenizer.ggml.model",
                          "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                          "tokenizer.ggml.merges", "tokenizer.ggml.add_bos_token"})
    EXPECT_NE(written.find(key), nullptr) << key;
  EXPECT_EQ(written.at("general.name").as_string(), "tiny-" + arch);
  EXPECT_EQ(written.at("general.file_type").as_int(), 0);
  EXPECT_EQ(written.at("tokenizer.ggml.pre").as_string(), f["pre"].get<std::string>());
  EXPECT_EQ(written.find_tensor("output.weight") != nullptr, !c.tie_embeddings);
  EXPECT_EQ(written.tensors().size(), fixture.tensors().size());

  // The tokenizer: ids, special tokens, stop ids, chat rendering.
  for (const json& e : f["encodings"])
    EXPECT_EQ(back.tokenizer.tokenizer->encode(e["text"].get<std::string>(), true), e["ids"].get<Ids>()) << e["text"];
  EXPECT_EQ(back.tokenizer.encode(f["text"].get<std::string>()), m.tokenizer.encode(f["text"].get<std::string>()));
  EXPECT_EQ(back.tokenizer.bos_id, m.tokenizer.bos_id);
  EXPECT_EQ(back.tokenizer.eos_id, m.tokenizer.eos_id);
  EXPECT_EQ(back.tokenizer.pad_id, m.tokenizer.pad_id);
  EXPECT_EQ(back.tokenizer.add_bos, m.tokenizer.add_bos);
  EXPECT_EQ(back.tokenizer.stop_ids, m.tokenizer.stop_ids);
  EXPECT_EQ(back.tokenizer.tokenizer->vocab_size(), m.tokenizer.tokenizer->vocab_size());
  ASSERT_EQ(back.tokenizer.chat_template.has_value(), m.tokenizer.chat_template.has_value());
  if (m.tokenizer.chat_template) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array(
        {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi there"}}});
    EXPECT_EQ(back.tokenizer.render_chat(messages, true), m.tokenizer.render_chat(messages, true));
  }

  // F16 and Q8_0: norms stay F32; Q8_0 falls back to F16 for ffn_down (rows of 48, not whole 32-blocks).
  // Logit differences measured: F16 2e-4 (qwen2) to 6e-4 (qwen3); Q8_0 0.023 (qwen2) to 0.056 (qwen3).
  for (auto [type, tolerance] : {std::pair{GgmlType::F16, 2e-3}, std::pair{GgmlType::Q8_0, 0.1}}) {
    fs::path path = dir / (std::string(formats::ggml_type_name(type)) + ".gguf");
    save_gguf_model(m.model, m.tokenizer, arch, path, type);
    formats::GgufFile file(path);
    EXPECT_EQ(file.at("general.file_type").as_int(), type == GgmlType::F16 ? 1 : 7);
    EXPECT_EQ(file.find_tensor("blk.0.attn_norm.weight")->type, GgmlType::F32);
    EXPECT_EQ(file.find_tensor("output_norm.weight")->type, GgmlType::F32);
    EXPECT_EQ(file.find_tensor("blk.0.attn_q.weight")->type, type);
    EXPECT_EQ(file.find_tensor("blk.0.ffn_down.weight")->type, GgmlType::F16);
    if (arch == "qwen2") {
      EXPECT_EQ(file.find_tensor("blk.0.attn_q.bias")->type, GgmlType::F32);
    }
    GgufModel q = load_gguf_model(path);
    double diff = max_diff(logits_of(q, ids), logits);
    std::cout << arch << " " << formats::ggml_type_name(type) << ": largest logit difference " << diff << "\n";
    EXPECT_LT(diff, tolerance) << formats::ggml_type_name(type);
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, TinyGgufExport, ::testing::Values("llama", "qwen2", "qwen3"));

// ---- refusals ----------------------------------------------------------------------------------------

std::string refusal(const std::string& arch, const std::function<void(nn::CausalTransformerConfig&)>& change) {
  nn::CausalTransformerConfig c;
  c.vocab_size = 64;
  c.emb_features = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.qk_norm = arch == "qwen3";
  change(c);
  return error_of([&] { check_gguf_exportable(c, arch); });
}

TEST(GgufExport, RefusesWhatTheArchitectureCannotExpress) {
  EXPECT_EQ(refusal("llama", [](auto&) {}), "(no error)");
  EXPECT_EQ(refusal("qwen3", [](auto&) {}), "(no error)");
  EXPECT_EQ(refusal("llama", [](auto& c) { c.attention_bias = c.attention_output_bias = true; }), "(no error)");
  auto expect = [](const std::string& message, const std::string& field) {
    EXPECT_NE(message.find(field), std::string::npos) << message;
  };
  expect(refusal("mamba", [](auto&) {}), "\"mamba\"");
  expect(refusal("llama", [](auto& c) { c.sandwich_norms = true; }), "sandwich_norms");
  expect(refusal("llama", [](auto& c) { c.attn_logit_softcap = 50; }), "attn_logit_softcap");
  expect(refusal("qwen2", [](auto& c) { c.final_logit_softcap = 30; }), "final_logit_softcap");
  expect(refusal("llama", [](auto& c) { c.mlp = "geglu"; }), "mlp");
  expect(refusal("qwen2", [](auto& c) { c.mlp_bias = true; }), "mlp_bias");
  expect(refusal("llama", [](auto& c) { c.qk_norm = true; }), "qk_norm");
  expect(refusal("qwen3", [](auto& c) { c.qk_norm = false; }), "qk_norm");
  expect(refusal("qwen3", [](auto& c) { c.attention_bias = true; }), "attention_bias");
  expect(refusal("qwen2", [](auto& c) { c.attention_output_bias = true; }), "attention_output_bias");
  expect(refusal("llama", [](auto& c) { c.norm_weight_offset = 1; }), "norm_weight_offset");
  expect(refusal("llama", [](auto& c) { c.embedding_scale = 2; }), "embedding_scale");
  expect(refusal("llama", [](auto& c) { c.causal = false; }), "causal");
  expect(refusal("llama", [](auto& c) { c.rope_scaling.type = "llama3"; }), "rope_scaling");
  expect(refusal("llama", [](auto& c) { c.query_pre_attn_scalar = 100; }), "query_pre_attn_scalar");
  expect(refusal("llama", [](auto& c) {
           c.layer_types = {"sliding_attention", "full_attention"};
           c.kinds["sliding_attention"].window = 8;
         }),
         "sliding window");
}

TEST(GgufExport, RefusesModelsAndTokenizersByFieldAndWritesNothing) {
  GgufModel m = load_gguf_model(tiny_dir() / "llama.gguf");
  test::TempDir dir;
  fs::path out = dir / "out.gguf";
  // A Gemma 2 checkpoint as llama: its gelu-tanh MLP is the first field llama cannot hold.
  HfModel gemma2 = load_hf_model(test::fixtures() / "hf" / "gemma2");
  std::string message = error_of([&] { save_gguf_model(gemma2.model, m.tokenizer, "llama", out, GgmlType::F32); });
  EXPECT_NE(message.find(out.string()), std::string::npos) << message;
  EXPECT_NE(message.find("mlp"), std::string::npos) << message;
  // The byte tokenizer.
  data::PretrainedTokenizer bytes;
  bytes.tokenizer = std::make_unique<data::ByteTokenizer>();
  message = error_of([&] { save_gguf_model(m.model, bytes, "llama", out, GgmlType::F32); });
  EXPECT_NE(message.find("byte"), std::string::npos) << message;
  EXPECT_NE(message.find("BPE"), std::string::npos) << message;
  // Other tensor types.
  message = error_of([&] { save_gguf_model(m.model, m.tokenizer, "llama", out, GgmlType::Q4_0); });
  EXPECT_NE(message.find("Q4_0"), std::string::npos) << message;
  // Architecture that does not fit: qwen3 needs qk_norm.
  message = error_of([&] { save_gguf_model(m.model, m.tokenizer, "qwen3", out, GgmlType::F32); });
  EXPECT_NE(message.find("qk_norm"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(out));
}

// A vocabulary dew learned (GPT-2's split) is written with the pre-tokenizer name llama.cpp knows: its
// llama-vocab.cpp accepts "gpt-2" and refuses "gpt2" ("unknown pre-tokenizer type"), which dew wrote before.
TEST(GgufExport, ALearnedVocabularyGetsThePreTokenizerNameLlamaCppKnows) {
  data::PretrainedTokenizer learned;
  learned.tokenizer = data::load_tokenizer((test::fixtures() / "trained_bpe" / "tokenizer.json").string());
  formats::GgufWriter writer;
  add_gguf_tokenizer(writer, learned, learned.tokenizer->vocab_size(), "");
  std::string pre;
  for (const auto& [key, value] : writer.metadata())
    if (key == "tokenizer.ggml.pre") pre = value.as_string();
  EXPECT_EQ(pre, "gpt-2");
  // And dew reads it back as the same split.
  EXPECT_NO_THROW(data::gguf_pre_tokenizer(pre, "(test)"));
}

// ---- gguf-py and transformers --------------------------------------------------------------------------

TEST_P(TinyGgufExport, ReadByGgufPyAndTransformers) {
  const std::string arch = GetParam();
  const char* python = std::getenv("DEW_REFERENCE_PYTHON");
  if (!python || !*python) GTEST_SKIP() << "set DEW_REFERENCE_PYTHON to a Python with gguf and transformers";
  GgufModel m = load_gguf_model(tiny_dir() / (arch + ".gguf"));
  const Ids ids = read_json(tiny_dir() / (arch + ".json"))["ids"].get<Ids>();
  test::TempDir dir;
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0}) {
    const std::string name = formats::ggml_type_name(type);
    fs::path path = dir / (arch + "-" + name + ".gguf");
    save_gguf_model(m.model, m.tokenizer, arch, path, type);
    // dew's reading of its own file: the float tensors and the logits of the reloaded model.
    GgufModel back = load_gguf_model(path);
    formats::GgufFile file(path);
    std::map<std::string, at::Tensor> reference;
    for (const auto& info : file.tensors()) reference[info.name] = formats::gguf_tensor(file, info.name, at::kFloat);
    reference["dew.ids"] = at::tensor(std::vector<std::int64_t>(ids.begin(), ids.end()), at::kLong);
    reference["dew.logits"] = logits_of(back, ids).contiguous();
    fs::path ref_path = dir / (arch + "-" + name + ".safetensors");
    formats::save_safetensors(ref_path, reference);
    auto script = test::fixtures().parent_path().parent_path() / "tools" / "reference" / "check_gguf_export.py";
    auto result = test::run_command("HF_HUB_OFFLINE=1 '" + std::string(python) + "' '" + script.string() + "' '" +
                                    path.string() + "' '" + ref_path.string() + "' 2>&1");
    EXPECT_EQ(result.status, 0) << result.output;
    std::cout << "[ gguf-py/transformers ] " << arch << " " << name << ": " << result.output;
  }
}

// ---- the real model ----------------------------------------------------------------------------------

fs::path smollm2_path() {
  fs::path models;
  if (const char* m = std::getenv("DEW_MODELS")) models = m;
  else if (const char* c = std::getenv("DEW_CACHE")) models = fs::path(c) / "models";
  else models = fs::path(std::getenv("HOME") ? std::getenv("HOME") : "/") / ".cache" / "dew" / "models";
  return models / "SmolLM2-135M-Instruct.Q4_1.gguf";
}

TEST(GgufExport, SmolLM2ToF16AndQ8_0) {
  fs::path path = smollm2_path();
  if (!fs::exists(path)) GTEST_SKIP() << path << " is absent: run scripts/fetch_models.sh to fetch it";
  at::set_num_threads(2);
  GgufModel m = load_gguf_model(path);
  Ids ids = m.tokenizer.encode("The capital of France is");
  at::Tensor logits = logits_of(m, ids);
  test::TempDir dir;
  // Measured largest logit differences from the loaded Q4_1 model: F16 0.031, Q8_0 0.63; same argmax.
  for (auto [type, tolerance] : {std::pair{GgmlType::F16, 0.1}, std::pair{GgmlType::Q8_0, 1.0}}) {
    fs::path out = dir / "smollm2.gguf";
    auto start = std::chrono::steady_clock::now();
    save_gguf_model(m.model, m.tokenizer, "llama", out, type, {.name = "SmolLM2-135M-Instruct"});
    double save_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    GgufModel back = load_gguf_model(out);
    EXPECT_EQ(back.tokenizer.encode("The capital of France is"), ids);
    nlohmann::ordered_json messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Hi"}}});
    EXPECT_EQ(back.tokenizer.render_chat(messages, true), m.tokenizer.render_chat(messages, true));
    at::Tensor got = logits_of(back, ids);
    double diff = max_diff(got, logits);
    std::cout << "SmolLM2 " << formats::ggml_type_name(type) << ": export " << save_s << " s, "
              << fs::file_size(out) / 1e6 << " MB, largest logit difference " << diff << "\n";
    EXPECT_LT(diff, tolerance);
    EXPECT_TRUE(at::equal(got.argmax(-1), logits.argmax(-1)));
  }
}

}  // namespace
}  // namespace dew::interop
