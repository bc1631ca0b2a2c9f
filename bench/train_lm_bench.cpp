// Training throughput of a decoder LM: builds a CausalTransformer and an LMObjective, trains it with the
// Trainer on random token rows held in memory (no checkpoints or evaluation during the measured steps),
// and prints one JSON line: median tokens/s over the measured steps (after warmup), peak RSS, the
// measured matmul peak and MFU. bench/train_lm.sh runs it beside PyTorch eager and dewml (JAX) on the
// same model and batch (tools/bench/train_lm_peers.py) and prints ratios.
//
//   train_lm_bench [--vocab 4096] [--emb 256] [--layers 4] [--heads 4] [--kv-heads 0] [--mlp-features 1024]
//                  [--seq 128] [--batch 16] [--max-seq-len 0] [--dtype float32] [--device cpu]
//                  [--steps 10] [--warmup 3] [--threads 0] [--ema 0] [--seed 0] [--phases [--trace FILE]]
//
// The step time is the interval between two Trainer step callbacks: the whole training step (batch,
// forward, loss, backward, gradient scaling, clipping, schedule, optimizer, EMA when --ema > 0). --phases
// instead drives the same pieces the Trainer calls by hand and prints the median time of each phase;
// --trace FILE adds one step under LibTorch's (legacy) profiler and writes its Chrome trace to FILE.
// --threads 0 leaves LibTorch's default intra-op thread count.
//
// Data parallel: started as one rank of a multi-process job (`dew launch --nproc N -- train_lm_bench ...`,
// or any launcher that sets WORLD_SIZE > 1 and the torchrun variables), the Trainer joins the process group
// and each rank trains on its consecutive batch / N rows of the same global batch a single process draws
// (so the losses match a one-process run). --batch stays the global batch. Rank 0 alone prints the JSON
// line, with "processes": N, global tokens/s (batch x seq / rank 0's median step; the steps are in lockstep)
// and "peak_rss_mib_ranks", every rank's peak RSS (gathered after training). bench/ddp.sh runs it so.
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_support.h"
#include "dew/core/error.h"
#include "dew/data/batch_source.h"
#include "dew/distributed/process_group.h"
#include "dew/distributed/process_place.h"
#include "dew/nn/causal_transformer.h"
#include "dew/nn/decoder_flops.h"
#include "dew/nn/device.h"
#include "dew/objectives/lm_objective.h"
#include "dew/training/evaluate.h"
#include "dew/training/flops.h"
#include "dew/training/grad_clip.h"
#include "dew/training/optimizer.h"
#include "dew/training/lr_schedule.h"
#include "dew/training/trainer.h"

namespace {

using dew::bench::current_rss_mib;
using dew::bench::median;
using dew::bench::peak_rss_mib;
using Clock = std::chrono::steady_clock;

struct Options {
  std::int64_t vocab = 4096, emb = 256, layers = 4, heads = 4, kv_heads = 0, mlp_features = 1024;
  std::int64_t seq = 128, batch = 16, max_seq_len = 0, steps = 10, warmup = 3, threads = 0;
  std::int64_t experts = 0, top_k = 2;  // > 0 experts: Mixtral's block (tools/bench/train_moe_peers.py)
  std::uint64_t seed = 0;
  double ema = 0;
  std::string dtype = "float32", device = "cpu", trace, parallel = "ddp";
  bool phases = false;
};

// Four batches of random rows of seq + 1 ids, cycled. With `world` processes each batch of `rows` rows is
// drawn whole (the same on every rank) and this rank keeps its consecutive rows / world of it.
dew::bench::CycledBatches random_rows(std::int64_t vocab, std::int64_t seq, std::int64_t rows, std::uint64_t seed,
                                      std::int64_t rank = 0, std::int64_t world = 1) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const std::int64_t mine = rows / world;
  std::vector<dew::data::Batch> pool(4);
  for (auto& batch : pool) {
    auto all = at::randint(vocab, {rows, seq + 1}, generator, at::kLong);
    batch.set("text", world > 1 ? all.narrow(0, rank * mine, mine).clone() : all);
  }
  return dew::bench::CycledBatches(std::move(pool), mine);
}

Options parse(int argc, char** argv) {
  Options o;
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) throw std::runtime_error(std::string(argv[i]) + " needs a value");
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--vocab") o.vocab = std::stoll(value(i));
    else if (a == "--emb") o.emb = std::stoll(value(i));
    else if (a == "--layers") o.layers = std::stoll(value(i));
    else if (a == "--heads") o.heads = std::stoll(value(i));
    else if (a == "--kv-heads") o.kv_heads = std::stoll(value(i));
    else if (a == "--mlp-features") o.mlp_features = std::stoll(value(i));
    else if (a == "--seq") o.seq = std::stoll(value(i));
    else if (a == "--batch") o.batch = std::stoll(value(i));
    else if (a == "--max-seq-len") o.max_seq_len = std::stoll(value(i));
    else if (a == "--steps") o.steps = std::stoll(value(i));
    else if (a == "--warmup") o.warmup = std::stoll(value(i));
    else if (a == "--threads") o.threads = std::stoll(value(i));
    else if (a == "--seed") o.seed = std::stoull(value(i));
    else if (a == "--experts") o.experts = std::stoll(value(i));
    else if (a == "--top-k") o.top_k = std::stoll(value(i));
    else if (a == "--ema") o.ema = std::stod(value(i));
    else if (a == "--dtype") o.dtype = value(i);
    else if (a == "--device") o.device = value(i);
    else if (a == "--phases") o.phases = true;
    else if (a == "--parallel") o.parallel = value(i);
    else if (a == "--trace") o.trace = value(i);
    else if (a == "--help" || a == "-h") {
      std::printf("usage: train_lm_bench [--vocab N] [--emb N] [--layers N] [--heads N] [--kv-heads N]\n"
                  "  [--mlp-features N] [--seq N] [--batch N] [--max-seq-len N] [--dtype float32|bfloat16]\n"
                  "  [--device cpu|cuda] [--steps N] [--warmup N] [--threads N] [--ema DECAY] [--seed N] [--phases]\n"
                  "  [--trace FILE]  (with --phases: one more step under LibTorch's profiler, a Chrome trace)\n"
                  "  [--parallel ddp|fsdp]  (as one of several processes: trainer.parallel)\n"
                  "  [--experts N [--top-k K]]  (a mixture of experts of --mlp-features each, Mixtral's block)\n");
      std::exit(0);
    } else {
      throw std::runtime_error("unknown flag '" + a + "' (see --help)");
    }
  }
  if (o.warmup < 1) throw std::runtime_error("--warmup must be at least 1 (the first step includes set-up)");
  if (o.steps < 1) throw std::runtime_error("--steps must be at least 1");
  return o;
}

dew::nn::CausalTransformerConfig model_config(const Options& o) {
  dew::nn::CausalTransformerConfig c;
  c.vocab_size = o.vocab;
  c.emb_features = o.emb;
  c.num_layers = o.layers;
  c.num_heads = o.heads;
  c.num_kv_heads = o.kv_heads;
  c.mlp = "swiglu";
  c.mlp_features = o.mlp_features;
  c.max_seq_len = o.max_seq_len > 0 ? o.max_seq_len : std::max<std::int64_t>(256, o.seq);
  c.rope_theta = 10000.0;
  c.qk_norm = true;
  c.tie_embeddings = true;
  c.norm_eps = 1e-6;
  c.dtype = o.dtype;
  c.param_dtype = "float32";
  if (o.experts > 0) {  // Mixtral's block, as transformers' MixtralForCausalLM (the peer) computes it
    c.num_experts = o.experts, c.experts_per_token = o.top_k, c.norm_topk_prob = true;
    c.qk_norm = false, c.tie_embeddings = false;
  }
  return c;
}

// AdamW 3e-4 (betas 0.9/0.95, weight decay 0.1), cosine, clip 1: what train_lm_peers.py configures.
dew::training::OptimConfig optim_config() { return dew::bench::adamw(3e-4, 0.95, 0.1, "cosine"); }


// The Trainer's step by hand (see Trainer::train_step), timed per phase. The phases are separated by
// synchronous CPU work, so each time is that phase's own.
std::map<std::string, double> phase_times(const Options& o, dew::objectives::LMObjective& objective,
                                          dew::bench::CycledBatches& rows, c10::Device device) {
  auto& module = objective.module();
  objective.init(o.seed);
  module.to(device);
  module.train();
  dew::training::NamedTensors named;
  std::vector<at::Tensor> params;
  for (auto& p : module.named_parameters()) {
    named[p.key()] = p.value();
    params.push_back(p.value());
  }
  auto optimizer = dew::training::make_optimizer(optim_config(), named);
  std::map<std::string, std::vector<double>> times;
  const std::int64_t total = o.warmup + o.steps;
  for (std::int64_t step = 0; step <= total; ++step) {
    std::unique_ptr<torch::autograd::profiler::RecordProfile> trace;
    if (step == total) {
      if (o.trace.empty()) break;
      trace = std::make_unique<torch::autograd::profiler::RecordProfile>(o.trace);  // the extra step, untimed
    }
    auto t0 = Clock::now();
    for (auto& p : params) p.mutable_grad() = at::Tensor();
    auto batch = dew::training::to_device(rows.next_batch(o.batch), device);
    auto loss = objective.loss(batch, step);
    auto t1 = Clock::now();
    loss.sum.backward();
    (void)loss.sum.detach().item<double>();
    auto t2 = Clock::now();
    {
      at::NoGradGuard no_grad;
      std::vector<at::Tensor> grads;
      for (const auto& p : params) {
        if (p.grad().defined()) grads.push_back(p.grad());
      }
      at::_foreach_div_(grads, loss.count);
    }
    dew::training::clip_grad_norm(params, 1.0);
    auto t3 = Clock::now();
    optimizer->step(dew::training::learning_rate_at(optim_config(), step, total));
    auto t4 = Clock::now();
    if (step < o.warmup || step == total) continue;
    auto d = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
    times["forward_loss_s"].push_back(d(t0, t1));
    times["backward_s"].push_back(d(t1, t2));
    times["scale_clip_s"].push_back(d(t2, t3));
    times["optimizer_s"].push_back(d(t3, t4));
    times["step_s"].push_back(d(t0, t4));
  }
  std::map<std::string, double> out;
  for (const auto& [name, values] : times) out[name] = median(values);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    const auto& place = dew::distributed::process_place();
    if (place.multi_process()) {
      if (o.phases) throw std::runtime_error("--phases runs in one process (WORLD_SIZE is " + std::to_string(place.world) + ")");
      if (o.batch % place.world != 0) {
        throw std::runtime_error("--batch " + std::to_string(o.batch) + " is not a multiple of the " +
                                 std::to_string(place.world) + " processes");
      }
    }
    if (o.threads > 0) at::set_num_threads(static_cast<int>(o.threads));
    const double base_rss = current_rss_mib();
    const auto device = dew::nn::resolve_device(o.device);
    const auto config = model_config(o);

    dew::nn::CausalTransformer model(config);
    dew::objectives::LMObjectiveConfig lm;
    lm.seq_len = o.seq;
    lm.loss.token_accuracy = false;  // the peers compute the loss only
    dew::objectives::LMObjective objective(model, lm);
    auto rows = random_rows(o.vocab, o.seq, o.batch, o.seed + 1, place.rank, place.world);

    const auto peak_dtype = config.dtype == "bfloat16" ? at::kBFloat16 : config.dtype == "float16" ? at::kHalf : at::kFloat;
    // With several processes rank 0 measures alone (the others wait for it at the rendezvous, in the
    // Trainer): measurements on every rank at once would share the cores and read low. The others' figure
    // only enters their Trainer's unprinted MFU.
    const double peak = place.rank == 0 ? dew::bench::best_peak_flops(device, peak_dtype) : 1.0;
    const double flops_per_token = dew::nn::decoder_flops_per_token(config, o.seq);
    const double tokens_per_step = static_cast<double>(o.batch * o.seq);

    nlohmann::ordered_json out;
    out["impl"] = "dew";
    out["processes"] = place.world;
    out["threads"] = at::get_num_threads();
    out["device"] = device.str();
    out["dtype"] = o.dtype;
    out["config"] = {{"vocab", o.vocab}, {"emb", o.emb}, {"layers", o.layers}, {"heads", o.heads},
                     {"mlp_features", o.mlp_features}, {"seq", o.seq}, {"batch", o.batch}, {"experts", o.experts},
                     {"top_k", o.top_k}};
    out["parameters"] = model->parameter_count();

    if (o.phases) {
      auto phases = phase_times(o, objective, rows, device);
      out["mode"] = "phases";
      for (const auto& [name, value] : phases) out[name] = value;
      out["tokens_per_s"] = tokens_per_step / phases["step_s"];
    } else {
      auto trainer = dew::bench::timing_trainer_config(o.warmup + o.steps, o.batch, o.seed);
      trainer.ema_decay = o.ema;
      trainer.device = o.device;
      trainer.parallel = o.parallel;
      trainer.peak_flops = peak;
      trainer.flops_per_token = flops_per_token;

      const auto times = dew::bench::time_trainer(objective, optim_config(), trainer, rows, o.warmup);
      const auto& step_seconds = times.step_seconds;
      const auto& losses = times.losses;
      const double step_s = median(step_seconds);
      out["mode"] = "trainer";
      out["steps_measured"] = step_seconds.size();
      out["step_s"] = step_s;
      out["step_s_min"] = *std::min_element(step_seconds.begin(), step_seconds.end());
      out["tokens_per_s"] = tokens_per_step / step_s;
      out["steps_s"] = step_seconds;
      out["loss_first"] = losses.front();
      out["loss_last"] = losses.back();
      out["state_mib"] = static_cast<double>(times.state_bytes) / (1 << 20);
      out["parallel"] = o.parallel;
    }
    out["peak_rss_mib"] = peak_rss_mib();
    out["base_rss_mib"] = base_rss;
    if (auto* group = dew::distributed::process_group()) {
      std::vector<double> rss(static_cast<std::size_t>(place.world), 0.0);
      rss[static_cast<std::size_t>(place.rank)] = out["peak_rss_mib"].get<double>();
      out["peak_rss_mib_ranks"] = group->all_reduce_sum(rss, "every process's peak RSS");
      dew::distributed::leave_process_group();
      if (place.rank != 0) return 0;  // one voice for the job
    } else {
      out["peak_rss_mib_ranks"] = {out["peak_rss_mib"]};
    }
    out["peak_flops"] = peak;
    out["flops_per_token"] = flops_per_token;
    // Over the job's peak: rank 0's measurement (one process's threads) times the processes, as the Trainer's.
    out["mfu"] = flops_per_token * out["tokens_per_s"].get<double>() / (peak * static_cast<double>(place.world));
    std::printf("%s\n", out.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_lm_bench: %s\n", e.what());
    return 1;
  }
}
