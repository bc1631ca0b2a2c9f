// `dew train KIND`: train a run of one of the kinds in the run-kind table (runs/run_kind.h: lm, sft, dpo,
// grpo, ...) on --data, or resume the run in --out. Every kind gets the same flags and the same flow.
//
// The config is built from, in order: the kind's defaults (a fresh run) or the run's run.json (a resumed
// run), the --config file, --data, --init-from, then each --set. A resumed run may change only trainer.*
// (the run says which field differs otherwise).
//
// One writer per run directory: the command locks --out (core/directory_lock.h) before it reads run.json,
// so a second `dew train` on it fails naming the first one's pid. A fresh run that fails before its first
// checkpoint removes what it wrote (runs::FreshRunUndo), so the corrected command starts fresh again.
//
// Started by `dew launch` as several processes (RANK, WORLD_SIZE, ... in the environment), every process runs
// this same command: they join one process group first; rank 0 alone takes the lock, checks the directory
// and writes run.json (the effective config, --set included), while the others wait; then the others open
// the run it wrote, and all train together (training/trainer.h). Only rank 0 prints the summary.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dew/cli/commands.h"
#include "dew/cli/torch_threads.h"
#include "dew/core/atomic_file.h"
#include "dew/core/config.h"
#include "dew/core/directory_lock.h"
#include "dew/core/interrupt.h"
#include "dew/distributed/process_group.h"
#include "dew/nn/device.h"
#include "dew/runs/run_directory.h"
#include "dew/runs/run.h"
#include "dew/runs/run_kind.h"
#include "dew/training/trainer_config.h"

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

void add_kind(CLI::App* train, const runs::RunKind& kind) {
  auto flags = std::make_shared<TrainFlags>();
  auto* cmd = train->add_subcommand(kind.name(), kind.summary());
  cmd->add_option("--data", flags->data, kind.data_help());
  cmd->add_option("--out", flags->out, "run directory: run.json, checkpoints, tracking/ (resumed if it holds a run)")
      ->required();
  cmd->add_option("--init-from", flags->init_from,
                  str("start from this model: a run directory, a Hugging Face checkpoint directory or a .gguf file "
                      "(sets init.from; its tokenizer reads the data)", kind.needs_init_from() ? "; required" : ""));
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
    const std::filesystem::path out = flags->out;
    auto effective_config = [&] {
      // Defaults for a fresh run; run.json's config when resuming (a run of another kind is refused by start).
      config::Json stored;
      if (runs::holds_run(out)) {
        runs::RunFile file = runs::read_run_file(out);
        if (file.kind == kind.name()) stored = std::move(file.config);
      }
      std::vector<std::string> overrides;
      if (!flags->data.empty()) overrides.push_back("data.path=" + flags->data);
      if (!flags->init_from.empty()) overrides.push_back("init.from=" + flags->init_from);
      const std::vector<runs::KindFlag> kind_flags = kind.flags();
      for (std::size_t i = 0; i < kind_flags.size(); ++i) {
        if (!flags->kind_values[i].empty()) overrides.push_back(kind_flags[i].field + "=" + flags->kind_values[i]);
      }
      overrides.insert(overrides.end(), flags->sets.begin(), flags->sets.end());
      std::optional<std::filesystem::path> file;
      if (!flags->config_file.empty()) file = flags->config_file;
      return kind.load_config(stored, file, overrides);
    };
    if (flags->print_config) {  // reads only: no lock, nothing created
      std::printf("%s\n", effective_config().dump(2).c_str());
      return;
    }
    const auto& place = distributed::process_place();
    if (place.multi_process()) {
      auto config = effective_config();
      training::TrainerConfig trainer;
      if (config.contains("trainer")) config::from_json(config["trainer"], trainer, "the trainer section");
      trainer.validate();  // trainer.parallel, and a batch that splits over the processes, before anyone waits
      distributed::join_process_group(nn::resolve_device(trainer.device),
                                      std::chrono::milliseconds(static_cast<std::int64_t>(trainer.timeout_seconds * 1000)));
      if (place.rank != 0) {
        distributed::process_group()->barrier("waiting for rank 0 to set up the run directory");
        use_available_threads();
        std::unique_ptr<runs::Run> run = runs::open_run(out);
        training::FitResult result = run->train(nullptr);
        distributed::leave_process_group();
        if (result.interrupted) std::exit(130);
        return;
      }
    }
    // Lock first: whether the run is fresh or resumed is decided by run.json, which only the holder writes.
    std::error_code ec;
    const bool existed = std::filesystem::exists(out, ec);
    const bool had_lock_file = std::filesystem::exists(out / DirectoryLock::kFileName, ec);
    DirectoryLock lock(out);
    std::optional<runs::FreshRunUndo> undo;
    if (!runs::holds_run(out)) {
      // A lock file means dew wrote here before: temporaries of a start that was killed are its own.
      if (had_lock_file) remove_stale_temporaries(out);
      try {
        runs::check_fresh_run_dir(out);
      } catch (const Error&) {
        if (!had_lock_file) std::filesystem::remove(out / DirectoryLock::kFileName, ec);  // not our directory
        throw;
      }
      undo.emplace(out, /*created_dir=*/!existed);
    } else {
      remove_stale_temporaries(out);  // run.json and checkpoint temporaries of a writer that was killed
    }
    auto config = effective_config();

    use_available_threads();
    std::unique_ptr<runs::Run> run = kind.start(out, config);
    std::printf("%s run '%s' (%s): %s\n", run->resumed() ? "resuming" : "new", out.c_str(), kind.name(), run->describe().c_str());
    std::fflush(stdout);
    if (auto* group = distributed::process_group()) group->barrier("rank 0 setting up the run directory");
    const training::TrainerConfig& c = run->trainer_config();

    training::FitResult result = run->train(stdout);
    if (undo) undo->keep();  // the run trained (or, with trainer.steps = 0, proved it can start)
    if (result.metrics.count("loss")) {
      std::printf("finished at step %lld: loss %.4f\n", static_cast<long long>(result.step), result.metrics.at("loss"));
    }
    if (!result.validation.empty()) {
      std::printf("validation (%s weights): %s\n", c.ema_decay > 0 ? "EMA" : "live",
                  format_scalars(result.validation, "").c_str());
    }
    const std::string checkpoint = !result.checkpoint.empty() ? str("checkpoint '", result.checkpoint.string(), "'")
                                   : c.steps == 0 ? std::string("no checkpoint written (trainer.steps = 0)")
                                                  : std::string("no checkpoint written");
    std::printf("%s; plots in '%s'\n", checkpoint.c_str(), (out / "tracking").c_str());
    std::fflush(stdout);
    distributed::leave_process_group();
    if (result.interrupted) std::exit(130);  // the shell's convention for a run stopped by a signal
  });
}
}  // namespace

void add_train_command(CLI::App& app) {
  auto* train = app.add_subcommand("train", "Train a model (resumes when the run directory already holds the run)");
  train->require_subcommand(1);
  for (const auto& kind : runs::run_kinds()) add_kind(train, *kind);
}

}  // namespace dew::cli
