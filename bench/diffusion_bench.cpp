// Image diffusion speed: training a class-conditional DiT with the DiffusionObjective and the Trainer, or
// sampling it with a solver and classifier-free guidance. Prints one JSON line; bench/diffusion.sh runs it
// beside PyTorch eager, dewml (JAX) and diffusers' scheduler loop on the same model
// (tools/bench/diffusion_peers.py) and prints ratios.
//
//   diffusion_bench train  [--size 28] [--channels 1] [--classes 10] [--patch 4] [--dim 128] [--depth 6]
//                          [--heads 4] [--batch 64] [--process flow] [--steps 10] [--warmup 3] [--ema 0.999]
//                          [--threads 0] [--seed 0]
//   diffusion_bench sample [same model flags] [--process vp] [--solver euler] [--sample-steps 20]
//                          [--images 16] [--cfg 2] [--repeats 3]
//
// train: the step time is the interval between two Trainer step callbacks, the whole step (noise and time
// draws, forward, loss, backward, clipping, AdamW, EMA), on random images in [-1, 1] held in memory.
// sample: the wall time of draw_images (what `dew sample` runs: x_T, guidance's doubled batch, the solver's
// loop) for --images images, median over --repeats, divided by images x solver steps: seconds per image per
// step. The model has random weights (the time per step does not depend on what it learned), with its
// zero-initialised output layers perturbed so the solver does real arithmetic.
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_support.h"
#include "dew/data/batch_source.h"
#include "dew/nn/device.h"
#include "dew/nn/diffusion/image_model.h"
#include "dew/objectives/diffusion/diffusion_objective.h"
#include "dew/runs/kinds/diffusion_sampling.h"
#include "dew/training/flops.h"
#include "dew/training/trainer.h"

namespace {

using dew::bench::median;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string mode = "train";
  std::int64_t size = 28, channels = 1, classes = 10, patch = 4, dim = 128, depth = 6, heads = 4;
  std::int64_t batch = 64, steps = 10, warmup = 3, threads = 0;
  std::int64_t sample_steps = 20, images = 16, repeats = 3;
  std::string process, solver = "euler", device = "cpu", trace;
  double ema = 0.999, cfg = 2.0;
  std::uint64_t seed = 0;
};

// Four random image batches in [-1, 1] with labels, cycled.
dew::bench::CycledBatches random_images(const Options& o) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(o.seed + 1);
  std::vector<dew::data::Batch> pool(4);
  for (auto& batch : pool) {
    batch.set("images", at::rand({o.batch, o.channels, o.size, o.size}, generator) * 2 - 1);
    batch.set("labels", at::randint(o.classes, {o.batch}, generator, at::kLong));
  }
  return dew::bench::CycledBatches(std::move(pool), o.batch);
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
    if (a == "--size") o.size = std::stoll(value(i));
    else if (a == "--channels") o.channels = std::stoll(value(i));
    else if (a == "--classes") o.classes = std::stoll(value(i));
    else if (a == "--patch") o.patch = std::stoll(value(i));
    else if (a == "--dim") o.dim = std::stoll(value(i));
    else if (a == "--depth") o.depth = std::stoll(value(i));
    else if (a == "--heads") o.heads = std::stoll(value(i));
    else if (a == "--batch") o.batch = std::stoll(value(i));
    else if (a == "--steps") o.steps = std::stoll(value(i));
    else if (a == "--warmup") o.warmup = std::stoll(value(i));
    else if (a == "--threads") o.threads = std::stoll(value(i));
    else if (a == "--sample-steps") o.sample_steps = std::stoll(value(i));
    else if (a == "--images") o.images = std::stoll(value(i));
    else if (a == "--repeats") o.repeats = std::stoll(value(i));
    else if (a == "--process") o.process = value(i);
    else if (a == "--solver") o.solver = value(i);
    else if (a == "--device") o.device = value(i);
    else if (a == "--ema") o.ema = std::stod(value(i));
    else if (a == "--cfg") o.cfg = std::stod(value(i));
    else if (a == "--seed") o.seed = std::stoull(value(i));
    else if (a == "--trace") o.trace = value(i);
    else if (a == "--help" || a == "-h") {
      std::printf("usage: diffusion_bench train|sample [--size N] [--channels N] [--classes N] [--patch N] [--dim N]\n"
                  "  [--depth N] [--heads N] [--batch N] [--process flow|vp|edm] [--steps N] [--warmup N] [--ema DECAY]\n"
                  "  [--threads N] [--seed N] [--device cpu|cuda]\n"
                  "  train: [--trace FILE]  (one more forward + backward under LibTorch's profiler, a Chrome trace)\n"
                  "  sample: [--solver NAME] [--sample-steps N] [--images N] [--cfg SCALE] [--repeats N]\n");
      std::exit(0);
    } else {
      throw std::runtime_error("unknown flag '" + a + "' (see --help)");
    }
  }
  if (o.process.empty()) o.process = o.mode == "train" ? "flow" : "vp";
  if (o.warmup < 1) throw std::runtime_error("--warmup must be at least 1 (the first step includes set-up)");
  if (o.steps < 1 || o.repeats < 1) throw std::runtime_error("--steps and --repeats must be at least 1");
  return o;
}

dew::nn::diffusion::ImageModelConfig model_config(const Options& o) {
  dew::nn::diffusion::ImageModelConfig c;
  c.kind = "dit";
  c.image_size = o.size;
  c.channels = o.channels;
  c.num_classes = o.classes;
  c.patch_size = o.patch;
  c.dim = o.dim;
  c.depth = o.depth;
  c.heads = o.heads;
  c.positions = "sincos";
  return c;
}

dew::objectives::diffusion::DiffusionObjectiveConfig diffusion_config(const Options& o) {
  dew::objectives::diffusion::DiffusionObjectiveConfig d;
  d.process = o.process;
  d.label_dropout = 0.1;
  d.validate();
  return d;
}

// AdamW at a constant 2e-4 (the spec's optax.adamw(2e-4): betas 0.9/0.999, weight decay 1e-4), clip 1.
dew::training::OptimConfig optim_config() { return dew::bench::adamw(2e-4, 0.999, 1e-4, "constant"); }

void train(const Options& o, nlohmann::ordered_json& out) {
  const auto config = model_config(o);
  auto model = dew::nn::diffusion::make_image_model(config);
  dew::objectives::diffusion::DiffusionObjective objective(dew::objectives::diffusion::diffusion_model(model),
                                                           diffusion_config(o), o.seed);
  auto images = random_images(o);
  const auto device = dew::nn::resolve_device(o.device);
  const double peak = dew::bench::best_peak_flops(device, at::kFloat);
  const double flops_per_image = 3 * dew::nn::diffusion::image_model_flops(config);

  auto trainer = dew::bench::timing_trainer_config(o.warmup + o.steps, o.batch, o.seed);
  trainer.ema_decay = o.ema;
  trainer.device = o.device;

  const auto times = dew::bench::time_trainer(objective, optim_config(), trainer, images, o.warmup);
  const auto& step_seconds = times.step_seconds;
  const auto& losses = times.losses;
  if (!o.trace.empty()) {  // after the timed steps, so the profiler costs them nothing
    torch::autograd::profiler::RecordProfile profile(o.trace);
    objective.loss(images.next_batch(o.batch), o.warmup + o.steps).sum.backward();
  }
  const double step_s = median(step_seconds);
  out["parameters"] = model->parameter_count();
  out["steps_measured"] = step_seconds.size();
  out["step_s"] = step_s;
  out["step_s_min"] = *std::min_element(step_seconds.begin(), step_seconds.end());
  out["steps_s"] = step_seconds;
  out["images_per_s"] = static_cast<double>(o.batch) / step_s;
  out["loss_first"] = losses.front();
  out["loss_last"] = losses.back();
  out["peak_flops"] = peak;
  out["flops_per_image"] = flops_per_image;
  out["mfu"] = flops_per_image * static_cast<double>(o.batch) / step_s / peak;
}

void sample(const Options& o, nlohmann::ordered_json& out) {
  const auto config = model_config(o);
  auto model = dew::nn::diffusion::make_image_model(config);
  {
    // The zero-initialised adaLN and output layers would make every prediction zero: perturb them.
    at::NoGradGuard no_grad;
    auto generator = at::make_generator<at::CPUGeneratorImpl>(o.seed + 2);
    for (auto& p : model->parameters()) {
      if (p.abs().max().item<float>() == 0) p.copy_(at::randn(p.sizes(), generator) * 0.02);
    }
  }
  model->to(dew::nn::resolve_device(o.device));
  model->eval();
  dew::runs::ImageDrawRequest request;
  request.labels.resize(static_cast<std::size_t>(o.images));
  for (std::int64_t i = 0; i < o.images; ++i) request.labels[static_cast<std::size_t>(i)] = i % o.classes;
  request.seed = o.seed;
  request.batch = o.images;
  request.sampler.solver = o.solver;
  request.sampler.steps = o.sample_steps;
  request.sampler.guidance.scale = o.cfg;
  const auto diffusion = diffusion_config(o);
  (void)dew::runs::draw_images(model, diffusion, request);  // warm-up: first-call allocations
  std::vector<double> seconds;
  for (std::int64_t r = 0; r < o.repeats; ++r) {
    const auto start = Clock::now();
    (void)dew::runs::draw_images(model, diffusion, request);
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  const double s = median(seconds);
  out["solver"] = o.solver;
  out["sample_steps"] = o.sample_steps;
  out["images"] = o.images;
  out["cfg"] = o.cfg;
  out["sample_s"] = s;
  out["sample_s_all"] = seconds;
  out["s_per_image_step"] = s / static_cast<double>(o.images * o.sample_steps);
}

}  // namespace

int main(int argc, char** argv) {
  return dew::bench::run_bench("diffusion_bench", [&](nlohmann::ordered_json& out) {
    const Options o = parse(argc, argv);
    if (o.threads > 0) at::set_num_threads(static_cast<int>(o.threads));
    out["mode"] = o.mode;
    out["device"] = o.device;
    out["process"] = o.process;
    out["config"] = {{"size", o.size}, {"channels", o.channels}, {"classes", o.classes}, {"patch", o.patch},
                     {"dim", o.dim},   {"depth", o.depth},       {"heads", o.heads},     {"batch", o.batch}};
    if (o.mode == "train") train(o, out);
    else sample(o, out);
  });
}
