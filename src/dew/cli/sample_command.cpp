// `dew sample RUN --out grid.png`: images drawn from a diffusion run (the newest checkpoint's EMA weights
// unless --live or --step), as a labelled grid PNG with a row per label and, with --images, one PNG per
// sample. The run's sample section is the default sampler; the flags override it. The same seed gives the
// same images.
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "dew/cli/commands.h"
#include "dew/distributed/torch_threads.h"
#include "dew/core/error.h"
#include "dew/core/interrupt.h"
#include "dew/runs/run_kind.h"

namespace dew::cli {

namespace {
struct SampleFlags {
  std::string run_dir, out, images, labels = "all", solver, spacing, device;
  std::optional<std::int64_t> steps, step;
  std::optional<double> cfg_scale, eta;
  std::int64_t n = 8;
  std::uint64_t seed = 0;
  bool live = false;
};

// "all" -> empty (every class); "0,3,7" -> {0, 3, 7}.
std::vector<std::int64_t> parse_labels(const std::string& text) {
  std::vector<std::int64_t> out;
  if (text == "all") return out;
  std::stringstream in(text);
  std::string piece;
  while (std::getline(in, piece, ',')) {
    try {
      std::size_t used = 0;
      const long long v = std::stoll(piece, &used);
      if (used != piece.size()) throw std::invalid_argument(piece);
      out.push_back(v);
    } catch (const std::exception&) {
      fail("--labels must be \"all\" or comma-separated class ids like 0,3,7; got \"", text, "\"");
    }
  }
  if (out.empty()) fail("--labels must be \"all\" or comma-separated class ids like 0,3,7; got \"", text, "\"");
  return out;
}
}  // namespace

void add_sample_command(CLI::App& app) {
  auto flags = std::make_shared<SampleFlags>();
  auto* cmd = app.add_subcommand("sample", "Draw images from a diffusion run into a labelled grid PNG");
  cmd->add_option("run_dir", flags->run_dir, "run directory written by `dew train diffusion`")->required();
  cmd->add_option("--out", flags->out, "the grid PNG to write")->required();
  cmd->add_option("--images", flags->images, "also write one PNG per sample into this directory");
  cmd->add_option("--labels", flags->labels, "class ids to draw, comma-separated, or all (default: a row per class)");
  cmd->add_option("--n", flags->n, "samples per label (the grid's columns; default 8)");
  cmd->add_option("--seed", flags->seed, "noise seed (default 0): the same seed draws the same images");
  cmd->add_option("--solver", flags->solver, "ddpm, ddim, euler, euler_ancestral, heun, dpmpp_2m, dpmpp_2s, unipc, lms, pndm "
                                              "(default: the run's sample.solver)");
  cmd->add_option("--steps", flags->steps, "solver steps (default: the run's sample.steps)");
  cmd->add_option("--spacing", flags->spacing, "timestep spacing: linspace, leading, trailing or karras");
  cmd->add_option("--cfg-scale", flags->cfg_scale, "classifier-free guidance scale (1 = none; default: the run's)");
  cmd->add_option("--eta", flags->eta, "noise of ddim and euler_ancestral");
  cmd->add_option("--step", flags->step, "checkpoint step to draw from (default: the newest)");
  cmd->add_option("--device", flags->device, "cpu, cuda, cuda:N (default: the run's trainer.device)");
  cmd->add_flag("--live", flags->live, "use the live weights instead of the EMA copy");

  cmd->callback([flags] {
    exit_on_interrupt();  // the outputs are written atomically at the end: Ctrl-C leaves nothing half-written
    distributed::use_available_threads();
    runs::SampleRequest request;
    request.grid = flags->out;
    if (!flags->images.empty()) request.images_dir = flags->images;
    request.labels = parse_labels(flags->labels);
    request.per_label = flags->n;
    request.seed = flags->seed;
    if (!flags->solver.empty()) request.solver = flags->solver;
    if (!flags->spacing.empty()) request.spacing = flags->spacing;
    request.steps = flags->steps;
    request.cfg_scale = flags->cfg_scale;
    request.eta = flags->eta;
    request.live = flags->live;
    request.step = flags->step;
    request.device = flags->device;
    const auto start = std::chrono::steady_clock::now();
    auto run = runs::open_run(flags->run_dir);
    const auto result = run->sample(request);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%lld images (%s) from checkpoint '%s' in %.1f s -> '%s'%s\n", static_cast<long long>(result.images),
                result.sampler.c_str(), result.checkpoint.c_str(), seconds, flags->out.c_str(),
                flags->images.empty() ? "" : (" and '" + flags->images + "/'").c_str());
  });
}

}  // namespace dew::cli
