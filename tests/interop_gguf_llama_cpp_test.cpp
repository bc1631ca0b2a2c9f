// llama.cpp itself runs the GGUF files dew writes: dew-llama-greedy (tools/llama_cpp/greedy_tokens.cpp, built
// from the pinned llama-cpp-python sdist by scripts/setup_llama_cpp.sh; scripts/test.sh names it in
// DEW_LLAMA_GREEDY) loads each export, tokenizes a text with the file's vocabulary and continues it greedily.
// Checked: llama.cpp loads the file (a missing key or an unknown pre-tokenizer name fails with llama.cpp's own
// message), its prompt ids equal dew's encoding of the text, and each token it picks is dew's greedy pick
// given the same prefix, to within the difference the two programs' arithmetic allows (teacher forcing:
// dew scores llama.cpp's whole sequence, so one near-tie cannot derail the rest of the comparison).
// The exports: the tiny llama/qwen2/qwen3 fixtures as F32, F16 and Q8_0; the other architectures' fixtures
// (gemma, gemma2, gemma3, phi3, gpt2, gptneox, olmo2, granite) as F32 and F16; a decoder on a BPE vocabulary dew
// learned (the case llama.cpp refused before the "gpt-2" pre-tokenizer name); the real SmolLM2 when fetched.
// And the other way: dew's native Q4_1 decoding of the real SmolLM2 file against llama.cpp's on that file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "dew/data/tokenizers/tokenizer.h"
#include "dew/formats/gguf.h"
#include "dew/inference/generate.h"
#include "dew/interop/gguf_export.h"
#include "dew/interop/gguf_model.h"
#include "dew/nn/quantized_weights.h"
#include "test_support.h"

namespace dew::interop {
namespace {
namespace fs = std::filesystem;
using formats::GgmlType;
using Ids = std::vector<std::int32_t>;

constexpr int kNewTokens = 8;
const char* kText = "The capital of France is Paris, 2024.";

struct LlamaCppRun {
  Ids prompt, tokens;
};

// dew-llama-greedy's path, or "" (the test skips) where it was not built.
std::string llama_greedy() {
  const char* path = std::getenv("DEW_LLAMA_GREEDY");
  return path && *path ? path : "";
}

// The shell command running dew-llama-greedy, stderr with stdout. (Appended piece by piece: GCC 12 warns
// falsely on "'" + std::string&&.)
std::string llama_cpp_command(const fs::path& gguf, const std::string& text, int new_tokens) {
  std::string command = llama_greedy();
  command.insert(0, 1, '\'');
  command.append("' '").append(gguf.string()).append("' '").append(text).append("' ");
  return command.append(std::to_string(new_tokens)).append(" 2>&1");
}

// llama.cpp on `gguf`: the text tokenized by llama.cpp, or `ids` as the prompt when given.
LlamaCppRun run_llama_cpp(const fs::path& gguf, const std::string& text, const Ids& ids = {}) {
  std::string command = llama_cpp_command(gguf, text, kNewTokens);
  if (!ids.empty()) {
    command.insert(command.size() - 5, " --ids ");  // before " 2>&1"
    std::string list;
    for (std::int32_t id : ids) list.append(list.empty() ? "" : ",").append(std::to_string(id));
    command.insert(command.size() - 5, list);
  }
  auto result = test::run_command(command);
  LlamaCppRun run;
  EXPECT_EQ(result.status, 0) << "llama.cpp on " << gguf << ":\n" << result.output;
  if (result.status != 0) return run;
  // The JSON is the last line; llama.cpp's warnings (if any) come before it.
  auto json = nlohmann::json::parse(result.output.substr(result.output.rfind("{\"prompt\"")));
  run.prompt = json["prompt"].get<Ids>();
  run.tokens = json["tokens"].get<Ids>();
  return run;
}

// Checks llama.cpp's continuation `run` against `model`: each pick is dew's greedy pick given the same prefix
// to within `tolerance` (how far below dew's largest logit llama.cpp's pick may score in dew's logits, set per
// tensor type by the caller from what the two programs compute differently).
void expect_dew_agrees(nn::CausalTransformer& model, const LlamaCppRun& run, double tolerance, const std::string& name) {
  std::vector<std::int64_t> sequence(run.prompt.begin(), run.prompt.end());
  for (std::int32_t token : run.tokens) sequence.push_back(token);
  at::NoGradGuard no_grad;
  auto input = at::tensor(sequence, at::kLong).unsqueeze(0);
  at::Tensor logits = model->forward({.ids = input})[0];
  int equal = 0;
  double worst = 0;
  for (int step = 0; step < kNewTokens; ++step) {
    at::Tensor row = logits[static_cast<std::int64_t>(run.prompt.size()) - 1 + step];
    const auto dew_pick = row.argmax().item<std::int64_t>();
    const double shortfall = (row.max() - row[run.tokens[step]]).item<double>();
    equal += dew_pick == run.tokens[step];
    worst = std::max(worst, shortfall);
    EXPECT_LE(shortfall, tolerance) << "step " << step << ": llama.cpp picked " << run.tokens[step] << ", dew "
                                    << dew_pick << " (dew scores llama.cpp's pick " << shortfall << " lower)";
  }
  std::cout << "[ llama.cpp ] " << name << ": " << equal << "/" << kNewTokens
            << " greedy tokens identical to dew's; llama.cpp's picks at most " << worst
            << " below dew's best logit (tolerance " << tolerance << ")\n";
}

// Runs `gguf` in llama.cpp and checks it against dew's reading of the same file: llama.cpp loads it, its
// prompt ids are dew's encoding of the text, and its greedy picks are dew's (expect_dew_agrees).
void expect_llama_cpp_agrees(const fs::path& gguf, double tolerance) {
  SCOPED_TRACE(gguf.filename().string());
  GgufModel m = load_gguf_model(gguf);
  const LlamaCppRun run = run_llama_cpp(gguf, kText);
  if (run.tokens.empty()) return;
  EXPECT_EQ(run.prompt, m.tokenizer.encode(kText)) << "llama.cpp and dew tokenize the text differently";
  expect_dew_agrees(m.model, run, tolerance, gguf.filename().string());
}

// Tolerances, from what the two programs compute differently on these models (logits of magnitude about 1):
//  - F32: both multiply float32 weights by float32 activations; only the order of the sums differs, a few
//    ulps per dot product (float32 eps 1.2e-7, sums of <= 256 terms), 1e-4 leaves a margin of ~100x.
//  - F16: dew converts the weights to float32; ggml converts each activation row to float16 (relative error
//    2^-11 = 4.9e-4) before every product, a few 1e-4 relative per layer on logits of size ~1: 2e-2.
//  - Q8_0: both read the same 8-bit weights, but ggml also quantizes each 32-element activation block to
//    8 bits (error up to 1/254 of the block's largest value) before every product: 0.1.
double tolerance_of(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return 1e-4;
    case GgmlType::F16: return 2e-2;
    default: return 0.1;
  }
}

class LlamaCppRunsExport : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCppRunsExport, TinyFixtureAsF32F16AndQ8_0) {
  if (llama_greedy().empty()) GTEST_SKIP() << "set DEW_LLAMA_GREEDY (bash scripts/setup_llama_cpp.sh prints it)";
  const std::string arch = GetParam();
  GgufModel m = load_gguf_model(test::fixtures() / "smollm2" / "tiny" / (arch + ".gguf"));
  test::TempDir dir;
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0}) {
    fs::path path = dir / (arch + "-" + formats::ggml_type_name(type) + ".gguf");
    save_gguf_model(m.model, m.tokenizer, arch, path, type);
    expect_llama_cpp_agrees(path, tolerance_of(type));
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, LlamaCppRunsExport, ::testing::Values("llama", "qwen2", "qwen3"));

// The other architectures' tiny fixtures (llama.cpp's converter's files, tests/fixtures/gguf_families) exported
// by dew as F32 and F16: llama.cpp runs each as it runs its own converter's output.
// The same weights with every layer attending to all earlier keys. llama.cpp turns Phi-3's sliding window off
// (llama_model_phi3 ignores attention.sliding_window, with a warning), while dew computes it as transformers
// does (the fixture's window is 5 keys): on the phi3 export both programs are run without it, so the test
// checks the fused tensors, partial rotary and metadata llama.cpp reads (docs/interop.md, GGUF phi3 row).
nn::CausalTransformer without_sliding_window(const nn::CausalTransformer& model) {
  nn::CausalTransformerConfig config = model->config();
  config.layer_types.clear();
  config.kinds.clear();
  nn::CausalTransformer full(config, nn::ParameterInit::none);
  at::NoGradGuard no_grad;
  auto source = model->named_parameters();
  for (auto& item : full->named_parameters()) item.value().copy_(source[item.key()]);
  return full;
}

class LlamaCppRunsFamilyExport : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(LlamaCppRunsFamilyExport, TinyFixtureAsF32AndF16) {
  if (llama_greedy().empty()) GTEST_SKIP() << "set DEW_LLAMA_GREEDY (bash scripts/setup_llama_cpp.sh prints it)";
  const auto& [fixture, arch] = GetParam();
  GgufModel m = load_gguf_model(test::fixtures() / "gguf_families" / (fixture + ".gguf"));
  if (arch == "phi3") m.model = without_sliding_window(m.model);
  test::TempDir dir;
  for (GgmlType type : {GgmlType::F32, GgmlType::F16}) {
    fs::path path = dir / (arch + "-" + formats::ggml_type_name(type) + ".gguf");
    save_gguf_model(m.model, m.tokenizer, arch, path, type);
    expect_llama_cpp_agrees(path, tolerance_of(type));
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, LlamaCppRunsFamilyExport,
                         ::testing::Values(std::pair{"gemma", "gemma"}, std::pair{"gemma2", "gemma2"},
                                           std::pair{"gemma3_text", "gemma3"}, std::pair{"phi3", "phi3"},
                                           std::pair{"gpt2", "gpt2"}, std::pair{"gpt_neox", "gptneox"},
                                           std::pair{"olmo2", "olmo2"}, std::pair{"granite", "granite"}),
                         [](const auto& info) { return info.param.second; });

// A small random decoder on the vocabulary dew learned in tests/fixtures/trained_bpe (GPT-2's pre-tokenizer
// split, which the export names "gpt-2"), exported as F32 to `path`.
void export_learned_vocabulary_decoder(const fs::path& path) {
  data::PretrainedTokenizer learned;
  learned.tokenizer = data::load_tokenizer((test::fixtures() / "trained_bpe" / "tokenizer.json").string());
  nn::CausalTransformerConfig config;
  config.vocab_size = learned.tokenizer->vocab_size();
  config.emb_features = 64;
  config.num_layers = 2;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  config.mlp_features = 128;
  config.qk_norm = false;
  config.max_seq_len = 64;
  nn::CausalTransformer model(config);
  save_gguf_model(model, learned, "llama", path, GgmlType::F32);
}

// The case: a decoder on a vocabulary dew learned, which llama.cpp refused before the "gpt-2" name.
TEST(LlamaCppRunsExport, DecoderOnALearnedVocabulary) {
  if (llama_greedy().empty()) GTEST_SKIP() << "set DEW_LLAMA_GREEDY (bash scripts/setup_llama_cpp.sh prints it)";
  test::TempDir dir;
  export_learned_vocabulary_decoder(dir / "learned.gguf");
  expect_llama_cpp_agrees(dir / "learned.gguf", tolerance_of(GgmlType::F32));
}

// The check itself: the learned-vocabulary export with its pre-tokenizer name spelled as dew wrote it before
// ("gpt2", which llama.cpp does not know) is refused by llama.cpp, and the test sees llama.cpp's message.
TEST(LlamaCppRunsExport, RefusesAnUnknownPreTokenizerAsLlamaCppSaysIt) {
  if (llama_greedy().empty()) GTEST_SKIP() << "set DEW_LLAMA_GREEDY (bash scripts/setup_llama_cpp.sh prints it)";
  test::TempDir dir;
  fs::path path = dir / "learned.gguf";
  export_learned_vocabulary_decoder(path);
  // The value "gpt-2" becomes "gpt2" plus a space: the same length, so the file's layout is unchanged.
  std::string bytes = test::read_text(path);
  const std::string key = "tokenizer.ggml.pre";
  std::size_t at = bytes.find("gpt-2", bytes.find(key));
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 5, "gpt2 ");
  test::write_text(path, bytes);
  auto result = test::run_command(llama_cpp_command(path, "hello", 2));
  EXPECT_NE(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("unknown pre-tokenizer type"), std::string::npos) << result.output;
}

fs::path smollm2_path() {
  fs::path models;
  if (const char* d = std::getenv("DEW_MODELS")) models = d;
  else models = fs::path(std::getenv("DEW_CACHE") ? std::getenv("DEW_CACHE") : std::string(std::getenv("HOME")) + "/.cache/dew") / "models";
  return models / "SmolLM2-135M-Instruct.Q4_1.gguf";
}

// The real SmolLM2-135M-Instruct re-exported as F16 (setup fetches it; skipped where it is absent).
TEST(LlamaCppRunsExport, SmolLM2AsF16) {
  if (llama_greedy().empty()) GTEST_SKIP() << "set DEW_LLAMA_GREEDY (bash scripts/setup_llama_cpp.sh prints it)";
  const fs::path source = smollm2_path();
  if (!fs::exists(source)) GTEST_SKIP() << source << " is absent: run scripts/fetch_models.sh to fetch it";
  at::set_num_threads(2);
  GgufModel m = load_gguf_model(source);
  test::TempDir dir;
  fs::path path = dir / "smollm2-f16.gguf";
  save_gguf_model(m.model, m.tokenizer, "llama", path, GgmlType::F16, {.name = "SmolLM2-135M-Instruct"});
  // Logits of a trained 135M model span tens of units: F16 activation rounding over 30 layers moves them by
  // up to ~0.05 (measured 0.03 between dew's F16 and Q4_1 readings); a pick within 0.25 of dew's best is one
  // the two programs could both make.
  expect_llama_cpp_agrees(path, 0.25);
}

// dew's native path (the Q4_1 file's blocks kept, activations quantized to 8 bits as ggml does) against
// llama.cpp on the same file, on the chat prompt `dew chat` sends. Both answer "L'Étoile, la Marseillaise"
// to "What is the capital of France?": the 4-bit model's first pick is a near-tie (llama.cpp: 25.10 against
// 24.86 for "The"), which float32 activations on dequantized weights break the other way.
TEST(LlamaCppRunsExport, SmolLM2NativeQ4_1DecodesAsLlamaCpp) {
  if (llama_greedy().empty()) GTEST_SKIP() << "set DEW_LLAMA_GREEDY (bash scripts/setup_llama_cpp.sh prints it)";
  const fs::path source = smollm2_path();
  if (!fs::exists(source)) GTEST_SKIP() << source << " is absent: run scripts/fetch_models.sh to fetch it";
  at::set_num_threads(2);
  GgufModel m = load_gguf_model(source, nn::WeightFormat::native);
  const Ids prompt = m.tokenizer.encode(m.tokenizer.render_chat(
      nlohmann::ordered_json::array({{{"role", "user"}, {"content", "What is the capital of France?"}}}), true));
  const LlamaCppRun run = run_llama_cpp(source, "", prompt);
  ASSERT_EQ(run.prompt, prompt);
  // Both quantize each 32-element activation block to 8 bits before the integer products, with their own
  // rounding and block sums (ggml's Q8_1 for Q4_1 weights); on logits of size ~25 that moves a logit by up to
  // a few tenths (the nn_quantized test measures dew's integer path against float32: mean 0.24, largest 2.3).
  expect_dew_agrees(m.model, run, 0.5, "SmolLM2 Q4_1 native");
  // What `dew chat` prints: the engine's own greedy decoding (one row at a time after the prefill).
  inference::Sampling greedy;
  greedy.temperature = 0.0;
  greedy.max_new_tokens = kNewTokens;
  const Ids decoded = inference::generate(m.model, {prompt}, greedy).tokens.at(0);
  std::cout << "[ llama.cpp ] SmolLM2 Q4_1: llama.cpp answers \"" << m.tokenizer.tokenizer->decode(run.tokens)
            << "\", dew's engine \"" << m.tokenizer.tokenizer->decode(decoded) << "\"\n";
}

}  // namespace
}  // namespace dew::interop
