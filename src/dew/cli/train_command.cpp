// `dew train KIND`: train a run of one of the kinds in the run-kind table (runs/run_kind.h: lm, sft, dpo,
// grpo, ...) on --data, or resume the run in --out. Every kind gets the same flags and the same flow: the
// flags become a runs::TrainRequest, and runs/train_run.h owns the life cycle (config, lock, fresh-run undo,
// process group, rank 0's set-up). Only rank 0 prints the summary.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "dew/cli/commands.h"
#include "dew/core/interrupt.h"
#include "dew/runs/run_kind.h"
#include "dew/runs/train_run.h"

namespace dew::cli {

namespace {
struct TrainFlags {
  std::string data, out, config_file, init_from;
  std::vector<std::string> sets;
  bool print_config = false;
  std::vector<std::string> kind_values;  // one per RunKind::flags() entry, "" = not given
};

std::string format_scalars(const std::map<std::string, double>& scalars, const char* prefix) {
  std::string out;
  for (const auto& [name, value] : scalars) out += str(out.empty() ? "" : ", ", prefix, name, " ", value);
  return out;
}

// The flags as the run's life cycle takes them: --data, --init-from and the kind's own flags become
// overrides of their fields, ahead of every --set.
runs::TrainRequest train_request(const TrainFlags& flags, const runs::RunKind& kind) {
  runs::TrainRequest request;
  request.out = flags.out;
  if (!flags.config_file.empty()) request.config_file = flags.config_file;
  if (!flags.data.empty()) request.overrides.push_back("data.path=" + flags.data);
  if (!flags.init_from.empty()) request.overrides.push_back("init.from=" + flags.init_from);
  const std::vector<runs::KindFlag> kind_flags = kind.flags();
  for (std::size_t i = 0; i < kind_flags.size(); ++i) {
    if (!flags.kind_values[i].empty()) request.overrides.push_back(kind_flags[i].field + "=" + flags.kind_values[i]);
  }
  request.overrides.insert(request.overrides.end(), flags.sets.begin(), flags.sets.end());
  return request;
}

void print_summary(const runs::TrainOutcome& outcome, const std::filesystem::path& out) {
  const training::FitResult& result = outcome.result;
  const training::TrainerConfig& c = outcome.trainer;
  if (result.metrics.count("loss")) {
    std::printf("finished at step %lld: loss %.4f\n", static_cast<long long>(result.step), result.metrics.at("loss"));
  }
  if (!result.validation.empty()) {
    std::printf("validation (%s weights): %s\n", c.ema_decay > 0 ? "EMA" : "live", format_scalars(result.validation, "").c_str());
  }
  const std::string checkpoint = !result.checkpoint.empty() ? str("checkpoint '", result.checkpoint.string(), "'")
                                 : c.steps == 0 ? std::string("no checkpoint written (trainer.steps = 0)")
                                                : std::string("no checkpoint written");
  std::printf("%s; plots in '%s'\n", checkpoint.c_str(), (out / "tracking").c_str());
  std::fflush(stdout);
}

void add_kind(CLI::App* train, const runs::RunKind& kind) {
  auto flags = std::make_shared<TrainFlags>();
  auto* cmd = train->add_subcommand(kind.name(), kind.summary());
  cmd->add_option("--data", flags->data, kind.data_help());
  cmd->add_option("--out", flags->out, "run directory: run.json, checkpoints, tracking/ (resumed if it holds a run)")
      ->required();
  if (kind.takes_init_from()) {
    cmd->add_option("--init-from", flags->init_from,
                    str("start from this model: a run directory, a Hugging Face checkpoint directory or a .gguf file "
                        "(sets init.from; its tokenizer reads the data)", kind.needs_init_from() ? "; required" : ""));
  }
  const std::vector<runs::KindFlag> kind_flags = kind.flags();
  flags->kind_values.resize(kind_flags.size());
  for (std::size_t i = 0; i < kind_flags.size(); ++i) {
    cmd->add_option(kind_flags[i].flag, flags->kind_values[i], str(kind_flags[i].help, " (sets ", kind_flags[i].field, ")"));
  }
  cmd->add_option("--config", flags->config_file, "JSON file with any of the fields below, by section");
  cmd->add_option("--set", flags->sets, "override one field: --set model.num_layers=6 (repeatable)");
  cmd->add_flag("--print-config", flags->print_config, "print the effective config as JSON and exit");
  cmd->footer("Config fields (section.field = default):\n" + kind.config_help());

  cmd->callback([flags, &kind] {
    // Before any thread exists: the signals go to one watcher thread, never to a computing one. Until the
    // trainer's loop arms its graceful stop (GracefulStop), Ctrl-C ends the process at once.
    exit_on_interrupt();
    const runs::TrainRequest request = train_request(*flags, kind);
    if (flags->print_config) {  // reads only: no lock, nothing created
      std::printf("%s\n", runs::effective_config(kind, request).dump(2).c_str());
      return;
    }
    const runs::TrainOutcome outcome = runs::train_run(kind, request, stdout);
    if (outcome.leader) print_summary(outcome, request.out);
    if (outcome.result.interrupted) std::exit(130);  // the shell's convention for a run stopped by a signal
  });
}
}  // namespace

void add_train_command(CLI::App& app) {
  auto* train = app.add_subcommand("train", "Train a model (resumes when the run directory already holds the run)");
  train->require_subcommand(1);
  for (const auto& kind : runs::run_kinds()) add_kind(train, *kind);
}

}  // namespace dew::cli
