// `dew eval RUN_DIR`: validation cross entropy and perplexity of a trained run over its whole validation
// split, with the EMA weights unless --live.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "dew/cli/commands.h"
#include "dew/cli/torch_threads.h"
#include "dew/core/error.h"
#include "dew/core/interrupt.h"
#include "dew/runs/lm_run.h"

namespace dew::cli {

namespace {
struct EvalFlags {
  std::string run_dir, device;
  std::optional<std::int64_t> step;
  std::int64_t batches = 0;
  bool live = false, json = false;
};
}  // namespace

void add_eval_command(CLI::App& app) {
  auto flags = std::make_shared<EvalFlags>();
  auto* cmd = app.add_subcommand("eval", "Validation cross entropy and perplexity of a run");
  cmd->add_option("run_dir", flags->run_dir, "run directory written by `dew train`")->required();
  cmd->add_option("--step", flags->step, "checkpoint step to evaluate (default: the newest)");
  cmd->add_option("--batches", flags->batches, "evaluate only the first N batches (default 0: the whole split)");
  cmd->add_option("--device", flags->device, "cpu, cuda, cuda:N (default: the run's trainer.device)");
  cmd->add_flag("--live", flags->live, "use the live weights instead of the EMA copy");
  cmd->add_flag("--json", flags->json, "print one JSON object instead of text");

  cmd->callback([flags] {
    if (flags->batches < 0) fail("--batches must be >= 0 (0 = the whole split), got ", flags->batches);
    exit_on_interrupt();  // reads only: Ctrl-C ends it at once
    use_available_threads();
    auto run = runs::LMRun::open(flags->run_dir);
    std::filesystem::path checkpoint;
    auto stats = run.evaluate(flags->live, flags->step, flags->batches, flags->device, &checkpoint);
    auto summary = stats.summary();
    const bool ema = !flags->live && run.config().trainer.ema_decay > 0;
    if (flags->json) {
      nlohmann::ordered_json j;
      j["checkpoint"] = checkpoint.string();
      j["weights"] = ema ? "ema" : "live";
      j["tokens"] = stats.has("ce") ? stats.values().at("ce").count : 0.0;
      for (const auto& [name, value] : summary) j[name] = value;
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf("checkpoint '%s' (%s weights), %.0f validation tokens\n", checkpoint.c_str(), ema ? "EMA" : "live",
                stats.has("ce") ? stats.values().at("ce").count : 0.0);
    for (const auto& [name, value] : summary) std::printf("%s %.6g\n", name.c_str(), value);
  });
}

}  // namespace dew::cli
