// Masked-diffusion LM (MDLM) speed: sampling a bidirectional decoder with the Unmask sampler, or training it
// with the MaskedDiffusionObjective and the Trainer. Prints one JSON line; bench/mdlm.sh runs `sample` beside
// dewml's DiscreteProcess.generate (tools/bench/mdlm_peers.py) on the same model sizes and prints ratios
// (its training comparison runs `dew train mdlm` itself; `train` here is for profiles without the CLI).
//
//   mdlm_bench sample [--vocab 4096] [--emb 192] [--layers 4] [--heads 4] [--mlp-features 512]
//                     [--max-seq-len 256] [--prompt-tokens 4] [--new-tokens 48] [--steps 16,32,64]
//                     [--remasking random|confidence] [--rows 1] [--repeats 3] [--threads 0] [--seed 0]
//                     [--trace FILE]
//   mdlm_bench train  [same model flags] [--seq 128] [--batch 16] [--train-steps 10] [--warmup 3]
//                     [--trace FILE]
//
// --vocab is the data's vocabulary; the model's is one larger, its last id the mask token (as `dew train
// mdlm` builds a fresh model).
// sample: the wall time of inference::masked_generate (what `dew generate RUN --steps S` runs, without process
// start-up, run loading and tokenizing) for --rows copies of a --prompt-tokens prompt followed by --new-tokens
// masked slots, temperature 1, median over --repeats after one warm-up call, for each --steps value; reported
// per generated token and per model evaluation. The model has random weights: the time per step does not
// depend on what it learned. --trace FILE adds one more call (the first --steps value) under LibTorch's profiler.
// train: the step time is the interval between two Trainer step callbacks (corruption draws, forward, loss,
// backward, clipping, AdamW), on random token rows held in memory, no EMA; --trace FILE adds one forward +
// backward under LibTorch's profiler (a Chrome trace; tools/bench/trace_ops.py sums it per op).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_support.h"
#include "dew/inference/masked_generate.h"
#include "dew/nn/causal_transformer.h"
#include "dew/objectives/masked_diffusion/mdlm_objective.h"
#include "dew/training/flops.h"

namespace {

using dew::bench::median;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string mode = "sample", remasking = "random", trace;
  std::int64_t vocab = 4096, emb = 192, layers = 4, heads = 4, mlp_features = 512, max_seq_len = 256;
  std::int64_t prompt_tokens = 4, new_tokens = 48, rows = 1, repeats = 3, threads = 0;
  std::int64_t seq = 128, batch = 16, train_steps = 10, warmup = 3;
  std::vector<std::int64_t> steps = {16, 32, 64};
  std::uint64_t seed = 0;
};

std::vector<std::int64_t> parse_list(const std::string& text) {
  std::vector<std::int64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(std::stoll(item));
  }
  if (out.empty()) throw std::runtime_error("--steps needs a comma-separated list of step counts");
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  int i = 1;
  if (argc > 1 && argv[1][0] != '-') o.mode = argv[i++];
  if (o.mode != "train" && o.mode != "sample") throw std::runtime_error("mode must be train or sample, got '" + o.mode + "'");
  auto value = [&](int& k) -> std::string {
    if (k + 1 >= argc) throw std::runtime_error(std::string(argv[k]) + " needs a value");
    return argv[++k];
  };
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--vocab") o.vocab = std::stoll(value(i));
    else if (a == "--emb") o.emb = std::stoll(value(i));
    else if (a == "--layers") o.layers = std::stoll(value(i));
    else if (a == "--heads") o.heads = std::stoll(value(i));
    else if (a == "--mlp-features") o.mlp_features = std::stoll(value(i));
    else if (a == "--max-seq-len") o.max_seq_len = std::stoll(value(i));
    else if (a == "--prompt-tokens") o.prompt_tokens = std::stoll(value(i));
    else if (a == "--new-tokens") o.new_tokens = std::stoll(value(i));
    else if (a == "--steps") o.steps = parse_list(value(i));
    else if (a == "--remasking") o.remasking = value(i);
    else if (a == "--rows") o.rows = std::stoll(value(i));
    else if (a == "--repeats") o.repeats = std::stoll(value(i));
    else if (a == "--threads") o.threads = std::stoll(value(i));
    else if (a == "--seed") o.seed = std::stoull(value(i));
    else if (a == "--seq") o.seq = std::stoll(value(i));
    else if (a == "--batch") o.batch = std::stoll(value(i));
    else if (a == "--train-steps") o.train_steps = std::stoll(value(i));
    else if (a == "--warmup") o.warmup = std::stoll(value(i));
    else if (a == "--trace") o.trace = value(i);
    else if (a == "--help" || a == "-h") {
      std::printf("usage: mdlm_bench sample|train [--vocab N] [--emb N] [--layers N] [--heads N] [--mlp-features N]\n"
                  "  [--max-seq-len N] [--threads N] [--seed N]\n"
                  "  sample: [--prompt-tokens N] [--new-tokens N] [--steps S1,S2,..] [--remasking random|confidence]\n"
                  "          [--rows N] [--repeats N] [--trace FILE]\n"
                  "  train:  [--seq N] [--batch N] [--train-steps N] [--warmup N] [--trace FILE]\n");
      std::exit(0);
    } else {
      throw std::runtime_error("unknown flag '" + a + "' (see --help)");
    }
  }
  if (o.warmup < 1) throw std::runtime_error("--warmup must be at least 1 (the first step includes set-up)");
  if (o.train_steps < 1 || o.repeats < 1 || o.rows < 1) throw std::runtime_error("--train-steps, --repeats and --rows must be at least 1");
  return o;
}

// The model `dew train mdlm` builds from scratch on data of vocabulary --vocab: bidirectional, mask id = vocab.
dew::nn::CausalTransformerConfig model_config(const Options& o) {
  dew::nn::CausalTransformerConfig c;
  c.vocab_size = o.vocab + 1;
  c.mask_token_id = o.vocab;
  c.causal = false;
  c.emb_features = o.emb;
  c.num_layers = o.layers;
  c.num_heads = o.heads;
  c.mlp_features = o.mlp_features;
  c.max_seq_len = o.max_seq_len;
  return c;
}

void sample(const Options& o, nlohmann::ordered_json& out) {
  dew::nn::CausalTransformer model(model_config(o));
  model->init_parameters(o.seed);
  // The same prompt ids the peer uses: a fixed rule, no tokenizer.
  std::vector<std::int32_t> prompt;
  for (std::int64_t i = 0; i < o.prompt_tokens; ++i) prompt.push_back(static_cast<std::int32_t>((17 * i + 5) % o.vocab));
  const std::vector<std::vector<std::int32_t>> prompts(static_cast<std::size_t>(o.rows), prompt);
  dew::inference::Sampling sampling;
  sampling.temperature = 1.0;
  sampling.max_new_tokens = o.new_tokens;
  sampling.seed = o.seed;
  auto run = [&](std::int64_t steps) {
    dew::inference::MaskedSampling masked;
    masked.steps = steps;
    masked.remasking = o.remasking;
    const auto start = Clock::now();
    auto g = dew::inference::masked_generate(model, prompts, sampling, masked);
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (g.lengths.at(0) != o.new_tokens) throw std::runtime_error("generated " + std::to_string(g.lengths.at(0)) + " tokens");
    return s;
  };
  (void)run(o.steps.front());  // warm-up: allocator, OpenMP pool, oneDNN kernels
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (const auto steps : o.steps) {
    std::vector<double> seconds;
    for (std::int64_t r = 0; r < o.repeats; ++r) seconds.push_back(run(steps));
    const double s = median(seconds);
    const double tokens = static_cast<double>(o.rows * o.new_tokens);
    results.push_back({{"steps", steps},
                       {"evaluations", steps},
                       {"s", s},
                       {"s_min", *std::min_element(seconds.begin(), seconds.end())},
                       {"ms_per_token", 1e3 * s / tokens},
                       {"ms_per_evaluation", 1e3 * s / static_cast<double>(steps)}});
  }
  if (!o.trace.empty()) {  // after the timed calls, so the profiler costs them nothing
    torch::autograd::profiler::RecordProfile profile(o.trace);
    (void)run(o.steps.front());
  }
  out["remasking"] = o.remasking;
  out["prompt_tokens"] = o.prompt_tokens;
  out["new_tokens"] = o.new_tokens;
  out["rows"] = o.rows;
  out["results"] = results;
}

void train(const Options& o, nlohmann::ordered_json& out) {
  const auto config = model_config(o);
  dew::nn::CausalTransformer model(config);
  dew::objectives::masked_diffusion::MDLMObjectiveConfig mdlm;
  mdlm.seq_len = o.seq;
  dew::objectives::masked_diffusion::MaskedDiffusionObjective objective(model, mdlm, o.seed);
  auto generator = at::make_generator<at::CPUGeneratorImpl>(o.seed + 1);
  std::vector<dew::data::Batch> pool(4);
  for (auto& batch : pool) batch.set("text", at::randint(o.vocab, {o.batch, o.seq}, generator, at::kLong));
  dew::bench::CycledBatches rows(std::move(pool), o.batch);
  const double peak = dew::bench::best_peak_flops(at::kCPU, at::kFloat);
  auto trainer = dew::bench::timing_trainer_config(o.warmup + o.train_steps, o.batch, o.seed);
  trainer.ema_decay = 0;
  const auto times = dew::bench::time_trainer(objective, dew::bench::adamw(2e-3, 0.95, 0.1, "cosine"), trainer, rows, o.warmup);
  if (!o.trace.empty()) {  // after the timed steps, so the profiler costs them nothing
    torch::autograd::profiler::RecordProfile profile(o.trace);
    objective.loss(rows.next_batch(o.batch), o.warmup + o.train_steps).sum.backward();
  }
  const double step_s = median(times.step_seconds);
  const double flops_per_token = dew::objectives::masked_diffusion::mdlm_flops_per_token(config, o.seq, mdlm.loss);
  out["parameters"] = model->parameter_count();
  out["seq"] = o.seq;
  out["batch"] = o.batch;
  out["steps_measured"] = times.step_seconds.size();
  out["step_s"] = step_s;
  out["step_s_min"] = *std::min_element(times.step_seconds.begin(), times.step_seconds.end());
  out["steps_s"] = times.step_seconds;
  out["tokens_per_s"] = static_cast<double>(o.batch * o.seq) / step_s;
  out["loss_first"] = times.losses.front();
  out["loss_last"] = times.losses.back();
  out["peak_flops"] = peak;
  out["flops_per_token"] = flops_per_token;
  out["mfu"] = flops_per_token * static_cast<double>(o.batch * o.seq) / step_s / peak;
}

}  // namespace

int main(int argc, char** argv) {
  return dew::bench::run_bench("mdlm_bench", [&](nlohmann::ordered_json& out) {
    const Options o = parse(argc, argv);
    if (o.threads > 0) at::set_num_threads(static_cast<int>(o.threads));
    out["mode"] = o.mode;
    out["config"] = {{"vocab", o.vocab}, {"emb", o.emb}, {"layers", o.layers}, {"heads", o.heads},
                     {"mlp_features", o.mlp_features}, {"max_seq_len", o.max_seq_len}};
    if (o.mode == "train") train(o, out);
    else sample(o, out);
  });
}
