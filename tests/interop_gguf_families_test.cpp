// The GGUF architecture rows beyond llama/qwen2/qwen3 (interop/gguf_architecture.h) against llama.cpp's
// own converter: tests/fixtures/gguf_families/FAMILY.gguf is convert_hf_to_gguf.py's output for the tiny
// Hugging Face fixture tests/fixtures/hf/FAMILY, and FAMILY.io.safetensors transformers' logits for the
// same model (tools/reference/make_gguf_family_fixtures.py; where llama.cpp computes the family differently
// from the fixture's config, both describe what llama.cpp computes). dew loads each file with
// transformers' logits; dew's export of each has the converter's tensors (names, shapes, values) and
// metadata and reads back with the same logits; with DEW_REFERENCE_PYTHON gguf-py reads the export and
// finds every tensor name in its architecture's list (tools/reference/check_gguf_export.py).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <set>

#include "dew/core/atomic_file.h"
#include "dew/core/config.h"
#include "dew/formats/gguf.h"
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

struct Family {
  std::string fixture, arch;
};
std::ostream& operator<<(std::ostream& os, const Family& f) { return os << f.arch; }

fs::path gguf_path(const Family& f) { return test::fixtures() / "gguf_families" / (f.fixture + ".gguf"); }
fs::path io_path(const Family& f) { return test::fixtures() / "gguf_families" / (f.fixture + ".io.safetensors"); }

double max_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

at::Tensor logits_of(GgufModel& m, const at::Tensor& ids) {
  at::NoGradGuard no_grad;
  return m.model->forward({ids});
}

// Both sides compute in float32 from the same float32 weights (gemma's norms differ by at most one ulp of
// 1, 1.2e-7, from the + 1 / - 1 round trip); only the summation order differs. Logits here are O(1) sums of
// at most 64 products per matmul through 2-4 blocks: a few hundred roundings of 6e-8 relative each, so
// 1e-5 bounds the difference (the HF family tests hold dew to transformers with the same bound).
constexpr double kFloat32Logits = 1e-5;

class GgufFamily : public ::testing::TestWithParam<Family> {};

TEST_P(GgufFamily, LoadsTheConvertersFileWithTransformersLogits) {
  const Family f = GetParam();
  GgufModel m = load_gguf_model(gguf_path(f));
  EXPECT_EQ(m.architecture, f.arch);
  formats::SafetensorsFile io(io_path(f));
  const double diff = max_diff(logits_of(m, io.load("ids")), io.load("logits"));
  EXPECT_LT(diff, kFloat32Logits) << f.arch;
  std::cout << "[ " << f.arch << " ] max |dew - transformers| logits = " << diff << "\n";
}

// A value as comparable text: floats as float32 (what both write), arrays element by element.
std::string value_text(const formats::GgufValue& v) {
  if (v.type == formats::GgufType::Array) {
    std::string out = "[";
    for (const auto& e : v.as_array()) out += value_text(e) + ",";
    return out + "]";
  }
  if (v.is_float()) return std::to_string(static_cast<float>(v.as_float()));
  if (v.type == formats::GgufType::Bool) return v.as_bool() ? "true" : "false";
  if (v.type == formats::GgufType::String) return v.as_string();
  return std::to_string(v.as_int());
}

TEST_P(GgufFamily, ExportWritesTheConvertersTensorsAndMetadataAndReadsBack) {
  const Family f = GetParam();
  GgufModel m = load_gguf_model(gguf_path(f));
  test::TempDir dir;
  const fs::path out = dir / (f.arch + ".gguf");
  save_gguf_model(m.model, m.tokenizer, f.arch, out, formats::GgmlType::F32);
  formats::GgufFile theirs(gguf_path(f)), ours(out);
  // The same tensors: names, shapes and float32 values (gemma's norms within 2 ulp of 1: the - 1 on load
  // and + 1 on export each round once).
  std::set<std::string> their_names, our_names;
  for (const auto& info : theirs.tensors()) their_names.insert(info.name);
  for (const auto& info : ours.tensors()) our_names.insert(info.name);
  EXPECT_EQ(our_names, their_names);
  for (const auto& name : their_names) {
    if (!our_names.count(name)) continue;
    auto a = formats::gguf_tensor(theirs, name, at::kFloat), b = formats::gguf_tensor(ours, name, at::kFloat);
    ASSERT_EQ(a.sizes(), b.sizes()) << name;
    EXPECT_LE(max_diff(a, b), 2.4e-7) << name;
  }
  // Every ARCH.* key the converter wrote, with its value; the ones dew may leave out say why.
  const std::string prefix = f.arch + ".";
  for (const auto& [key, value] : theirs.metadata()) {
    if (!key.starts_with(prefix)) continue;
    const auto* mine = ours.find(key);
    if (!mine && key == prefix + "rope.scaling.original_context_length") continue;  // phi3: longrope's, which dew refuses
    if (!mine && (key == prefix + "attention.key_length" || key == prefix + "attention.value_length") &&
        value.as_int() * theirs.at(prefix + "attention.head_count").as_int() == theirs.at(prefix + "embedding_length").as_int())
      continue;  // the default, embedding_length / head_count
    ASSERT_NE(mine, nullptr) << key;
    EXPECT_EQ(value_text(*mine), value_text(value)) << key;
  }
  // And the same model.
  GgufModel back = load_gguf_model(out);
  formats::SafetensorsFile io(io_path(f));
  EXPECT_EQ(max_diff(logits_of(back, io.load("ids")), logits_of(m, io.load("ids"))), 0.0) << f.arch;
}

TEST_P(GgufFamily, ExportIsReadByGgufPyUnderTheArchitecturesTensorNames) {
  const Family f = GetParam();
  const char* python = std::getenv("DEW_REFERENCE_PYTHON");
  if (!python || !*python) GTEST_SKIP() << "set DEW_REFERENCE_PYTHON to a Python with gguf";
  GgufModel m = load_gguf_model(gguf_path(f));
  formats::SafetensorsFile io(io_path(f));
  const at::Tensor ids = io.load("ids")[0].contiguous();
  test::TempDir dir;
  for (formats::GgmlType type : {formats::GgmlType::F32, formats::GgmlType::Q8_0}) {
    const fs::path path = dir / (f.arch + "-" + formats::ggml_type_name(type) + ".gguf");
    save_gguf_model(m.model, m.tokenizer, f.arch, path, type);
    GgufModel back = load_gguf_model(path);
    formats::GgufFile file(path);
    std::map<std::string, at::Tensor> reference;
    for (const auto& info : file.tensors()) reference[info.name] = formats::gguf_tensor(file, info.name, at::kFloat);
    reference["dew.ids"] = ids;
    reference["dew.logits"] = logits_of(back, ids.unsqueeze(0))[0].contiguous();
    const fs::path ref_path = dir / (f.arch + ".safetensors");
    formats::save_safetensors(ref_path, reference);
    auto script = test::fixtures().parent_path().parent_path() / "tools" / "reference" / "check_gguf_export.py";
    auto result = test::run_command("HF_HUB_OFFLINE=1 '" + std::string(python) + "' '" + script.string() + "' '" +
                                    path.string() + "' '" + ref_path.string() + "' --no-transformers 2>&1");
    EXPECT_EQ(result.status, 0) << result.output;
    std::cout << "[ gguf-py ] " << f.arch << ": " << result.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, GgufFamily,
                         ::testing::Values(Family{"gemma", "gemma"}, Family{"gemma2", "gemma2"},
                                           Family{"gemma3_text", "gemma3"}, Family{"phi3", "phi3"},
                                           Family{"gpt2", "gpt2"}, Family{"gpt_neox", "gptneox"},
                                           Family{"olmo2", "olmo2"}, Family{"granite", "granite"}),
                         [](const auto& info) { return info.param.arch; });

// The Hugging Face fixtures themselves export as their GGUF architecture (the model_type names the row)
// where llama.cpp computes what the fixture's config says, and are refused by field where it does not.
TEST(GgufFamilies, HfCheckpointsExportOrAreRefusedByField) {
  GgufModel tokenizer_source = load_gguf_model(test::fixtures() / "gguf_families" / "gpt2.gguf");
  test::TempDir dir;
  auto export_of = [&](const std::string& family) {
    HfModel hf = load_hf_model(test::fixtures() / "hf" / family);
    return error_of([&] { save_gguf_model(hf.model, tokenizer_source.tokenizer, family, dir / (family + ".gguf"), formats::GgmlType::F32); });
  };
  for (const char* family : {"gemma", "phi3", "gpt2", "olmo2", "granite"}) EXPECT_EQ(export_of(family), "(no error)") << family;
  auto expect = [](const std::string& message, const std::string& field) {
    EXPECT_NE(message.find(field), std::string::npos) << message;
  };
  expect(export_of("gemma2"), "query_pre_attn_scalar");   // 24, not head_dim: llama.cpp scales by head_dim
  expect(export_of("gemma3_text"), "query_pre_attn_scalar");
  expect(export_of("gpt_neox"), "mlp");                   // exact gelu; llama.cpp's is the tanh form
  expect(export_of("llama"), "rope_scaling.type");        // llama3 scaling needs rope_freqs
  expect(export_of("mistral"), "sliding window");         // llama has no sliding window
}

TEST(GgufFamilies, ExportRefusesByField) {
  nn::CausalTransformerConfig c;
  c.vocab_size = 64;
  c.emb_features = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  auto refusal = [&](const std::string& arch, const std::function<void(nn::CausalTransformerConfig&)>& change) {
    nn::CausalTransformerConfig copy = c;
    change(copy);
    return error_of([&] { check_gguf_exportable(copy, arch); });
  };
  auto expect = [](const std::string& message, const std::string& field) {
    EXPECT_NE(message.find(field), std::string::npos) << message;
  };
  expect(refusal("phi3", [](auto& x) { x.qk_norm = false; x.rope_scaling.type = "longrope"; }), "longrope");
  expect(refusal("gpt2", [](auto& x) { x.qk_norm = false; }), "norm");
  expect(refusal("gemma2", [](auto& x) {
           x.qk_norm = false;
           x.mlp = "geglu";
           x.norm_weight_offset = 1;
           x.embedding_scale = std::sqrt(32.0);
           x.sandwich_norms = true;
         }),
         "attn_logit_softcap");
  expect(refusal("olmo2", [](auto& x) { x.sandwich_norms = true; x.pre_norms = false; }), "qk_norm_per_head");
  expect(refusal("mamba", [](auto&) {}), "\"mamba\"");
}

// A copy of a family fixture with the first occurrence of `from` replaced by `to` (same length).
fs::path patched(const test::TempDir& dir, const std::string& fixture, const std::string& from, const std::string& to) {
  std::string bytes = read_file(test::fixtures() / "gguf_families" / (fixture + ".gguf"));
  const std::size_t at = bytes.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(from.size(), to.size());
  bytes.replace(at, from.size(), to);
  fs::path out = dir / ("patched-" + fixture + ".gguf");
  write_file_atomic(out, bytes);
  return out;
}

TEST(GgufFamilies, BadFilesNameTheFileAndTheKeyOrTensor) {
  test::TempDir dir;
  auto expect_error = [](const fs::path& file, std::initializer_list<std::string> parts) {
    const std::string message = error_of([&] { load_gguf_model(file); });
    EXPECT_NE(message.find(file.string()), std::string::npos) << message;
    for (const auto& part : parts) EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
  };
  // gemma3's rope.scaling.type "linear" -> "yarn__": a scaling dew does not compute.
  expect_error(patched(dir, "gemma3_text", "linear", "yarn__"), {"gemma3.rope.scaling.type", "yarn__"});
  // gpt2 without its position table.
  expect_error(patched(dir, "gpt2", "position_embd", "position_embX"), {"position_embd.weight", "missing"});
  // A phi3 file whose output.weight is renamed to a longrope factor tensor (the 8-byte length 13 before the
  // name makes it the tensor's own, not attn_output.weight's tail): refused naming longrope.
  const std::string thirteen("\x0d\0\0\0\0\0\0\0", 8);
  expect_error(patched(dir, "phi3", thirteen + "output.weight", thirteen + "rope_factors_"), {"rope_factors_", "longrope"});
  // olmo2 without context_length: the missing key is named.
  expect_error(patched(dir, "olmo2", "olmo2.context_length", "olmo2.context_lengtX"), {"olmo2.context_length"});
}

}  // namespace
}  // namespace dew::interop
