// `dew eval RUN_DIR`: the validation statistics of a trained run of any kind (an LM's cross entropy and
// perplexity, DPO's reward accuracy, ...) over its whole validation split, with the EMA weights unless --live.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "dew/cli/commands.h"
#include "dew/distributed/torch_threads.h"
#include "dew/core/error.h"
#include "dew/core/interrupt.h"
#include "dew/runs/run.h"

namespace dew::cli {

namespace {
struct EvalFlags {
  std::string run_dir, device;
  std::optional<std::int64_t> step, samples, sample_steps;
  std::uint64_t seed = 0;
  std::int64_t batches = 0;
  bool live = false, json = false;
};
}  // namespace

void add_eval_command(CLI::App& app) {
  auto flags = std::make_shared<EvalFlags>();
  auto* cmd = app.add_subcommand("eval", "Validation statistics of a run (an LM's cross entropy and perplexity, ...)");
  cmd->add_option("run_dir", flags->run_dir, "run directory written by `dew train`")->required();
  cmd->add_option("--step", flags->step, "checkpoint step to evaluate (default: the newest)");
  cmd->add_option("--batches", flags->batches, "evaluate only the first N batches (default 0: the whole split)");
  cmd->add_option("--device", flags->device, "cpu, cuda, cuda:N (default: the run's trainer.device)");
  cmd->add_flag("--live", flags->live, "use the live weights instead of the EMA copy");
  cmd->add_option("--samples", flags->samples,
                  "diffusion: images drawn for frechet_distance and class_accuracy (default 500; 0 = skip them)");
  cmd->add_option("--sample-steps", flags->sample_steps, "diffusion: solver steps for those images (default: the run's sample.steps)");
  cmd->add_option("--seed", flags->seed, "diffusion: noise seed for those images (default 0)");
  cmd->add_flag("--json", flags->json, "print one JSON object instead of text");

  cmd->callback([flags] {
    if (flags->batches < 0) fail("--batches must be >= 0 (0 = the whole split), got ", flags->batches);
    if (flags->samples && *flags->samples < 0) fail("--samples must be >= 0 (0 = none), got ", *flags->samples);
    if (flags->sample_steps && *flags->sample_steps < 1) fail("--sample-steps must be >= 1, got ", *flags->sample_steps);
    exit_on_interrupt();  // reads only: Ctrl-C ends it at once
    distributed::use_available_threads();
    auto run = runs::open_run(flags->run_dir);
    std::filesystem::path checkpoint;
    auto stats = run->evaluate({.live = flags->live, .step = flags->step, .max_batches = flags->batches, .device = flags->device,
                                .samples = flags->samples, .sample_steps = flags->sample_steps, .seed = flags->seed},
                               &checkpoint);
    auto summary = stats.summary();
    const bool ema = !flags->live && run->trainer_config().ema_decay > 0;
    // How much was evaluated: the count behind the loss's statistic (tokens for an LM, pairs for DPO).
    const std::string counted = run->validation_loss();
    const double count = stats.has(counted) ? stats.values().at(counted).count : 0.0;
    if (flags->json) {
      nlohmann::ordered_json j;
      j["checkpoint"] = checkpoint.string();
      j["weights"] = ema ? "ema" : "live";
      j[run->validation_unit()] = count;
      for (const auto& [name, value] : summary) j[name] = value;
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf("checkpoint '%s' (%s weights), %.0f validation %s\n", checkpoint.c_str(), ema ? "EMA" : "live", count,
                run->validation_unit().c_str());
    for (const auto& [name, value] : summary) std::printf("%s %.6g\n", name.c_str(), value);
  });
}

}  // namespace dew::cli
