// Issue 8, the inputs part: files and settings that were accepted and then gave wrong results with exit 0,
// crashed with an internal error, or ran for minutes. Each test reproduces one probe finding.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "dew/core/error.h"
#include "dew/data/token_files.h"
#include "dew/data/token_windows.h"
#include "dew/data/tokenize.h"
#include "dew/data/tokenizers/tokenizer_fingerprint.h"
#include "dew/formats/safetensors.h"
#include "dew/interop/hf_model.h"
#include "dew/nn/causal_transformer_config.h"
#include "dew/nn/parameter_count.h"
#include "dew/runs/kinds/lm_kind.h"
#include "dew/runs/run_directory.h"
#include "dew/training/checkpoint.h"
#include "run_test_support.h"

namespace fs = std::filesystem;
using dew::runs::start_lm_run;
using dew::test::open_decoder_run;
using dew::runs::LMRunConfig;
using dew::test::error_of;
using dew::test::run_command;
using dew::test::TempDir;
using Json = nlohmann::json;

namespace {

LMRunConfig tiny_run(const fs::path& data, std::int64_t steps) { return dew::test::tiny_lm_run_config(data, steps); }

std::string corpus_text() {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "Once upon a time there was a little house by the sea, and it was " + std::to_string(i) + ". ";
  return text;
}

// Tokenizes the corpus into `out` with `tokenizer` (replacing a previous token directory there).
void tokenize(const fs::path& work, const fs::path& out, const std::string& tokenizer) {
  if (!fs::exists(work / "corpus.txt")) dew::test::write_text(work / "corpus.txt", corpus_text());
  dew::data::TokenizeConfig t;
  t.input = (work / "corpus.txt").string();
  t.out = out.string();
  t.tokenizer = tokenizer;
  t.val_fraction = 0.3;
  t.threads = 1;
  dew::data::tokenize_corpus(t);
}

// The trained BPE fixture with the ids of two ordinary tokens swapped: a different tokenizer of the same size.
fs::path swapped_bpe(const fs::path& dir) {
  auto j = Json::parse(dew::test::read_text(dew::test::fixtures() / "trained_bpe" / "tokenizer.json"));
  auto& vocab = j["model"]["vocab"];
  std::string a, b;
  for (auto& [token, id] : vocab.items()) {
    if (id == 300) a = token;
    if (id == 301) b = token;
  }
  vocab[a] = 301;
  vocab[b] = 300;
  fs::create_directories(dir);
  dew::test::write_text(dir / "tokenizer.json", j.dump());
  return dir / "tokenizer.json";
}

fs::path trained_bpe() { return dew::test::fixtures() / "trained_bpe" / "tokenizer.json"; }

Json read_json(const fs::path& file) { return Json::parse(dew::test::read_text(file)); }
void write_json(const fs::path& file, const Json& j) { dew::test::write_text(file, j.dump(2)); }

// A trained tiny run (one checkpoint at `steps`) on byte-level or BPE tokens in work/tokens.
fs::path trained_run(const fs::path& work, const std::string& tokenizer = "byte", std::int64_t steps = 1) {
  dew::test::SingleThreaded threads;
  tokenize(work, work / "tokens", tokenizer);
  auto dir = work / "run";
  start_lm_run(dir, tiny_run(work / "tokens", steps))->train(nullptr);
  return dir;
}

}  // namespace

// ---- 5: the data re-tokenized with another tokenizer ---------------------------------------------------

TEST(ReliabilityInputs, EvalAndResumeRefuseDataRetokenizedWithByte) {
  TempDir work;
  auto run = trained_run(work.path(), trained_bpe().string());
  tokenize(work.path(), work.path() / "tokens", "byte");  // same directory, another vocabulary

  auto message = error_of([&] { open_decoder_run(run)->evaluate({}); });
  EXPECT_NE(message.find("was tokenized with another tokenizer"), std::string::npos) << message;
  EXPECT_NE(message.find((work.path() / "tokens").string()), std::string::npos) << message;
  EXPECT_NE(message.find(run.string()), std::string::npos) << message;
  EXPECT_NE(message.find("'byte'"), std::string::npos) << message;  // the data's tokenizer source

  auto resume = *dew::runs::stored_lm_config(run);
  resume.trainer.steps = 2;
  message = error_of([&] { start_lm_run(run, resume)->train(nullptr); });
  EXPECT_NE(message.find("was tokenized with another tokenizer"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(run / "2"));
}

TEST(ReliabilityInputs, EvalRefusesDataRetokenizedWithAnotherBpeOfTheSameSize) {
  TempDir work;
  auto run = trained_run(work.path(), trained_bpe().string());
  auto other = swapped_bpe(work.path() / "other");
  tokenize(work.path(), work.path() / "tokens", other.string());
  ASSERT_EQ(dew::data::read_token_meta(work.path() / "tokens").vocab_size, 2000);
  auto message = error_of([&] { open_decoder_run(run)->evaluate({}); });
  EXPECT_NE(message.find("was tokenized with another tokenizer"), std::string::npos) << message;
  EXPECT_NE(message.find(other.string()), std::string::npos) << message;
}

TEST(ReliabilityInputs, TokenizerFingerprintIsRecordedAndTellsTokenizersApart) {
  TempDir work;
  auto run = trained_run(work.path(), trained_bpe().string());
  auto bpe = dew::data::load_tokenizer(trained_bpe().string());
  auto swapped = dew::data::load_tokenizer(swapped_bpe(work.path() / "other").string());
  auto byte = dew::data::load_tokenizer("byte");
  const std::string sha = dew::data::tokenizer_sha256(*bpe);
  EXPECT_EQ(sha.size(), 64u);
  EXPECT_NE(sha, dew::data::tokenizer_sha256(*byte));
  EXPECT_NE(sha, dew::data::tokenizer_sha256(*swapped));
  EXPECT_EQ(swapped->vocab_size(), bpe->vocab_size());
  // The same tokenizer loaded from the data's copy and from the run's copy.
  EXPECT_EQ(dew::data::tokenizer_sha256(*open_decoder_run(run)->tokenizer()), sha);
  auto meta = read_json(work.path() / "tokens" / "meta.json");
  EXPECT_EQ(meta["tokenizer_sha256"], sha);
  EXPECT_EQ(read_json(run / "run.json")["tokenizer_sha256"], sha);
  // Files written before the field existed: the fingerprint comes from the tokenizer itself.
  meta.erase("tokenizer_sha256");
  write_json(work.path() / "tokens" / "meta.json", meta);
  auto run_json = read_json(run / "run.json");
  run_json.erase("tokenizer_sha256");
  write_json(run / "run.json", run_json);
  EXPECT_TRUE(std::isfinite(open_decoder_run(run)->evaluate({}).mean("ce")));
}

// ---- 6: non-finite weights -----------------------------------------------------------------------------

TEST(ReliabilityInputs, NanInEmaIsRefusedByEvalGenerateAndExport) {
  TempDir work;
  auto run = trained_run(work.path(), trained_bpe().string());  // export needs a tokenizer.json
  auto ema = run / "1" / "ema.safetensors";
  const std::string tensor = "model.layers.1.mlp.down_proj.weight";
  {
    std::map<std::string, at::Tensor> tensors;
    {
      dew::formats::SafetensorsFile file(ema);
      for (const auto& name : file.names()) tensors[name] = file.view(name).clone();
    }
    tensors[tensor].view(-1)[5] = std::nan("");
    dew::formats::save_safetensors(ema, tensors);
  }
  for (const std::string& command :
       {"eval '" + run.string() + "'", "generate '" + run.string() + "' --prompt Once --max-new-tokens 2",
        "export '" + run.string() + "' '" + (work.path() / "exported").string() + "'"}) {
    auto result = run_command(dew::test::dew_single_threaded(command));
    EXPECT_EQ(result.status, 1) << command << "\n" << result.output;
    EXPECT_NE(result.output.find(ema.string()), std::string::npos) << command << "\n" << result.output;
    EXPECT_NE(result.output.find("tensor '" + tensor + "' holds non-finite values (NaN at element 5)"), std::string::npos)
        << command << "\n" << result.output;
  }
  EXPECT_FALSE(fs::exists(work.path() / "exported"));
  // The live parameters are finite and still load.
  EXPECT_EQ(run_command(dew::test::dew_single_threaded("eval '" + run.string() + "' --live")).status, 0);
}

TEST(ReliabilityInputs, InfInAHuggingFaceCheckpointIsRefused) {
  TempDir work;
  auto dir = work.path() / "llama";
  fs::copy(dew::test::fixtures() / "hf" / "llama", dir);
  std::map<std::string, at::Tensor> tensors;
  {
    dew::formats::SafetensorsFile file(dir / "model.safetensors");
    for (const auto& name : file.names()) tensors[name] = file.view(name).clone();
  }
  tensors["model.norm.weight"].view(-1)[0] = -INFINITY;
  dew::formats::save_safetensors(dir / "model.safetensors", tensors);
  auto message = error_of([&] { dew::interop::load_hf_model(dir); });
  EXPECT_NE(message.find("tensor 'model.norm.weight' holds non-finite values (-inf at element 0)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("model.safetensors"), std::string::npos) << message;
}

// ---- 7 and 3: token files checked when they are opened, and before a run is written ---------------------

TEST(ReliabilityInputs, OutOfVocabularyIdIsRefusedWhenTheSplitIsOpened) {
  TempDir work;
  auto dir = work.path() / "tokens";
  dew::test::write_tiny_tokens(dir);  // uint8 ids in [0, 64)
  {
    std::fstream f(dir / "train.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1234);
    f.put(static_cast<char>(200));
  }
  auto message = error_of([&] { dew::data::TokenWindows windows(dir, 16, {}); });
  EXPECT_NE(message.find((dir / "train.bin").string()), std::string::npos) << message;
  EXPECT_NE(message.find("token 1234 has id 200, outside the vocabulary [0, 64)"), std::string::npos) << message;

  auto run = work.path() / "run";
  message = error_of([&] { start_lm_run(run, tiny_run(dir, 4)); });
  EXPECT_NE(message.find("token 1234 has id 200"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(run / "run.json"));
}

// Its speed (the scan runs on every open) is bench/input_paths_bench's token_id_scan case.
TEST(ReliabilityInputs, MaxIdScanOfSeveralMegabytesFindsTheLastId) {
  TempDir work;
  std::vector<dew::data::TokenId> ids(4'000'000);  // 8 MB of uint16
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<dew::data::TokenId>((i * 7919) % 50000);
  dew::test::write_token_dir(work.path(), ids, {1, 2, 3}, 50257);
  EXPECT_NO_THROW(dew::data::TokenFiles(work.path()).split(dew::data::Split::train));
  ids[3'999'999] = 50257;
  dew::test::write_token_dir(work.path(), ids, {1, 2, 3}, 50257);
  auto message = error_of([&] { dew::data::TokenFiles(work.path()).split(dew::data::Split::train); });
  EXPECT_NE(message.find("token 3999999 has id 50257, outside the vocabulary [0, 50257)"), std::string::npos) << message;
}

TEST(ReliabilityInputs, StartRefusesWrongSizedTokenFilesBeforeWritingRunJson) {
  TempDir work;
  auto dir = work.path() / "tokens";
  dew::test::write_tiny_tokens(dir);
  fs::resize_file(dir / "train.bin", 1500);
  auto run = work.path() / "run";
  auto message = error_of([&] { start_lm_run(run, tiny_run(dir, 4)); });
  EXPECT_NE(message.find("train.bin' has 1500 bytes, expected 2000"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(run / "run.json"));
}

TEST(ReliabilityInputs, StartRefusesCudaWithoutAGpuBeforeWritingRunJson) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "this machine has a GPU";
  TempDir work;
  dew::test::write_tiny_tokens(work.path() / "tokens");
  auto config = tiny_run(work.path() / "tokens", 4);
  config.trainer.device = "cuda";
  auto message = error_of([&] { start_lm_run(work.path() / "run", config); });
  EXPECT_NE(message.find("trainer.device is 'cuda'"), std::string::npos) << message;
  EXPECT_NE(message.find("use cpu"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(work.path() / "run" / "run.json"));
}

// ---- 9: models too large for the machine ---------------------------------------------------------------

TEST(ReliabilityInputs, ModelsTooLargeForMemoryAreRefusedFromTheConfig) {
  TempDir work;
  dew::test::write_tiny_tokens(work.path() / "tokens");
  auto run = work.path() / "run";
  auto wide = tiny_run(work.path() / "tokens", 4);
  wide.model.emb_features = 100000000;
  wide.model.mlp_features = 0;
  // Refused from the config, before anything is allocated: the message's parameter count and size say so
  // (the defect was an allocator crash, or minutes building a million layers).
  std::string message = error_of([&] { start_lm_run(run, wide); });
  EXPECT_NE(message.find("model.emb_features = 100000000"), std::string::npos) << message;
  EXPECT_NE(message.find("parameters"), std::string::npos) << message;
  EXPECT_NE(message.find("GiB"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(run / "run.json"));

  auto deep = tiny_run(work.path() / "tokens", 4);
  deep.model = dew::nn::CausalTransformerConfig{};  // the default widths, as the probe ran it
  deep.model.num_layers = 1000000;
  message = error_of([&] { start_lm_run(run, deep); });
  EXPECT_NE(message.find("model.num_layers = 1000000"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(run / "run.json"));
}

TEST(ReliabilityInputs, ParameterCountMatchesTheBuiltModel) {
  for (bool tied : {true, false}) {
    auto config = dew::test::tiny_decoder_config();
    config.tie_embeddings = tied;
    config.attention_bias = !tied;
    config.sandwich_norms = !tied;
    dew::nn::CausalTransformer model(config);
    std::int64_t built = 0;
    for (const auto& p : model->parameters()) built += p.numel();
    EXPECT_EQ(dew::nn::parameter_count(config), built) << tied;
  }
}

TEST(ReliabilityInputs, AllocationFailureBuildingAModelIsADewError) {
  auto config = dew::test::tiny_decoder_config();
  config.emb_features = std::int64_t{1} << 40;  // a 64 x 2^40 embedding: 256 TiB of float32
  auto message = error_of([&] { dew::nn::CausalTransformer model(config); });
  EXPECT_NE(message.find("cannot allocate the model's parameters: model.num_layers = 2, model.emb_features = 1099511627776"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("GiB of float32"), std::string::npos) << message;
}

TEST(ReliabilityInputs, GenerateFromARunTooLargeForMemoryIsRefused) {
  TempDir work;
  auto run = trained_run(work.path());
  auto j = read_json(run / "run.json");
  j["config"]["model"]["num_layers"] = 1000000000;  // 31 TB of float32 parameters: larger than any machine
  write_json(run / "run.json", j);
  std::string message = error_of([&] { open_decoder_run(run)->load_model(); });
  EXPECT_NE(message.find("model.num_layers = 1000000000"), std::string::npos) << message;
  EXPECT_NE(message.find((run / "run.json").string()), std::string::npos) << message;
}

// ---- 10 and data_position: a damaged state.json --------------------------------------------------------

TEST(ReliabilityInputs, TruncatedRngStateIsRefusedNamingTheFile) {
  TempDir work;
  auto run = trained_run(work.path(), "byte", 4);
  auto state_file = run / "4" / "state.json";
  auto state = read_json(state_file);
  state["rng_state"] = state["rng_state"].get<std::string>().substr(0, 100);
  write_json(state_file, state);
  auto resume = *dew::runs::stored_lm_config(run);
  resume.trainer.steps = 5;
  dew::test::SingleThreaded threads;
  auto message = error_of([&] { start_lm_run(run, resume)->train(nullptr); });
  EXPECT_NE(message.find(state_file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("'rng_state' holds 50 bytes"), std::string::npos) << message;
}

TEST(ReliabilityInputs, UnreachableDataPositionIsRefusedNamingTheFile) {
  TempDir work;
  auto run = trained_run(work.path(), "byte", 4);
  auto state_file = run / "4" / "state.json";
  auto state = read_json(state_file);
  EXPECT_EQ(state["data_position"], 16);  // 4 steps of 4 rows
  state["data_position"] = 1000000000000000;
  write_json(state_file, state);
  auto resume = *dew::runs::stored_lm_config(run);
  resume.trainer.steps = 5;
  dew::test::SingleThreaded threads;
  auto message = error_of([&] { start_lm_run(run, resume)->train(nullptr); });
  EXPECT_NE(message.find(state_file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("data_position 1000000000000000"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(run / "5"));
}

// Changing trainer.batch_size on resume is allowed: a smaller batch after a larger one is no false alarm,
// because each checkpoint records the largest batch size trained with so far.
TEST(ReliabilityInputs, ResumingWithASmallerBatchKeepsTheDataPositionBound) {
  TempDir work;
  auto run = trained_run(work.path(), "byte", 4);  // 4 steps of 4 rows: data_position 16
  auto resume = *dew::runs::stored_lm_config(run);
  resume.trainer.steps = 6;
  resume.trainer.batch_size = 2;
  dew::test::SingleThreaded threads;
  EXPECT_EQ(error_of([&] { start_lm_run(run, resume)->train(nullptr); }), "(no error)");
  auto state = read_json(run / "6" / "state.json");
  EXPECT_EQ(state["data_position"], 16 + 2 * 2);
  EXPECT_EQ(state["largest_batch_size"], 4);
  resume.trainer.steps = 7;  // 20 rows in 6 steps is more than 6 x 2, fine with the recorded 4
  EXPECT_EQ(error_of([&] { start_lm_run(run, resume)->train(nullptr); }), "(no error)");
  EXPECT_TRUE(fs::exists(run / "7"));
}

// ---- smaller findings -----------------------------------------------------------------------------------

TEST(ReliabilityInputs, MissingRunTokenizerCopyIsNamed) {
  TempDir work;
  auto run = trained_run(work.path(), trained_bpe().string());
  fs::remove_all(run / "tokenizer");
  auto message = error_of([&] { open_decoder_run(run)->tokenizer(); });
  EXPECT_NE(message.find("the run's copy of its tokenizer, '" + (run / "tokenizer" / "tokenizer.json").string() +
                         "', is missing"),
            std::string::npos)
      << message;
}

TEST(ReliabilityInputs, InitFromRefusesAnExplicitModelFieldItWouldIgnore) {
  TempDir work;
  auto base = trained_run(work.path(), trained_bpe().string());  // a base run needs a tokenizer.json to hand on
  auto config = tiny_run(work.path() / "tokens", 1);
  config.init.from = base.string();
  config.model.num_layers = 3;  // the base has 2
  auto message = error_of([&] { start_lm_run(work.path() / "ft", config); });
  EXPECT_NE(message.find("model.num_layers = 3"), std::string::npos) << message;
  EXPECT_NE(message.find("has 2"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(work.path() / "ft" / "run.json"));

  // The same architecture spelled out, or left at the defaults, is fine; dtypes stay the run's choice.
  config.model.num_layers = 2;
  EXPECT_EQ(error_of([&] { start_lm_run(work.path() / "ft", config); }), "(no error)");
  auto defaults = tiny_run(work.path() / "tokens", 1);
  defaults.model = dew::nn::CausalTransformerConfig();
  defaults.model.param_dtype = "bfloat16";
  defaults.init.from = base.string();
  EXPECT_EQ(error_of([&] { start_lm_run(work.path() / "ft2", defaults); }), "(no error)");
}

TEST(ReliabilityInputs, NonPositiveOrNonFiniteModelNumbersAreRefused) {
  auto refused = [](auto change, const std::string& fragment) {
    auto config = dew::test::tiny_decoder_config();
    change(config);
    auto message = error_of([&] { config.validate(); });
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
  };
  using Config = dew::nn::CausalTransformerConfig;
  refused([](Config& c) { c.norm_eps = -1; }, "model.norm_eps must be positive, got -1");
  refused([](Config& c) { c.norm_eps = 0; }, "model.norm_eps must be positive, got 0");
  refused([](Config& c) { c.norm_eps = std::nan(""); }, "model.norm_eps must be positive, got nan");
  refused([](Config& c) { c.rope_theta = std::nan(""); }, "model.rope_theta must be positive, got nan");
  refused([](Config& c) { c.embedding_scale = INFINITY; }, "model.embedding_scale must be finite");
  refused([](Config& c) { c.attn_logit_softcap = std::nan(""); }, "model.attn_logit_softcap must be >= 0");
  refused([](Config& c) { c.mlp_features = -5; }, "model.mlp_features must be >= 0");
  refused([](Config& c) { c.head_dim = -2; }, "model.head_dim must be >= 0");
}

TEST(ReliabilityInputs, ValFractionJustBelowOneIsReportedExactly) {
  TempDir work;
  dew::test::write_text(work.path() / "corpus.txt", "a small text of some bytes");
  dew::data::TokenizeConfig t;
  t.input = (work.path() / "corpus.txt").string();
  t.out = (work.path() / "tokens").string();
  t.val_fraction = 0.9999999;
  auto message = error_of([&] { dew::data::tokenize_corpus(t); });
  EXPECT_NE(message.find("val_fraction 0.9999999 of 26 tokens"), std::string::npos) << message;
}
