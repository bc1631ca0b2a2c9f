#pragma once
// The table of run kinds: one row per thing `dew train` can train (lm, sft, dpo, grpo, ...). A row says
// what its config is, what --data takes, and how to start or open a run of it; run.json's `kind` picks the
// row when a run is opened again. Adding an objective is adding a row (kinds/*.cpp) and listing it in
// kinds/run_kinds.cpp; the commands (train, eval, generate, chat, export) need no change.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dew/core/config.h"
#include "dew/runs/run.h"
#include "dew/runs/run_directory.h"
#include "dew/runs/typed_task.h"

namespace dew::runs {

// A command-line flag of one kind that sets a config field: `dew train grpo --reward last_number` is
// `--set grpo.reward=last_number`.
struct KindFlag {
  std::string flag;   // "--reward"
  std::string field;  // "grpo.reward"
  std::string help;
};

class RunKind {
 public:
  virtual ~RunKind() = default;
  virtual const char* name() const = 0;       // `dew train NAME`, run.json's kind
  virtual const char* summary() const = 0;    // the help line of `dew train NAME`
  virtual const char* data_help() const = 0;  // what --data takes
  // Whether a run can start from a trained model (--init-from, init.from): the decoder kinds can; image
  // kinds have no init section and are not offered the flag.
  virtual bool takes_init_from() const { return true; }
  // Whether a run needs --init-from (post-training starts from a trained model).
  virtual bool needs_init_from() const { return false; }
  // Flags beyond the shared ones (--data, --out, --init-from, --config, --set).
  virtual std::vector<KindFlag> flags() const { return {}; }
  // "section.field (default)  help" lines for --help.
  virtual std::string config_help() const = 0;
  // The effective config: `stored` (a resumed run's run.json config; null = the defaults), then the --config
  // file, then each override ("a.b=v"). Types and field names are checked here.
  virtual config::Json load_config(const config::Json& stored, const std::optional<std::filesystem::path>& file,
                                   const std::vector<std::string>& overrides) const = 0;
  // Refuses settings training would refuse, where that needs neither the data nor the starting model
  // (optimizer, trainer, LoRA and the kind's own sections): `--print-config` never shows a config that
  // `dew train` then rejects.
  virtual void validate_settings(const config::Json& config) const = 0;
  // Starts a fresh run in `run_dir`, or resumes the run there (then only trainer.* may differ).
  virtual std::unique_ptr<Run> start(const std::filesystem::path& run_dir, const config::Json& config) const = 0;
  // Opens a run whose run.json is `file` (for evaluation and generation).
  virtual std::unique_ptr<Run> open(const std::filesystem::path& run_dir, const RunFile& file) const = 0;
};

// The parts of a RunKind that follow from its typed Config alone: its name, help and flags, and how the
// effective config is assembled. A family of kinds (decoder_kind.h, image_kind.h) adds what --data takes
// and how its runs start and open.
template <class Config>
class TypedRunKind : public RunKind {
 public:
  TypedRunKind(const char* name, const char* summary, std::vector<KindFlag> flags = {})
      : name_(name), summary_(summary), flags_(std::move(flags)) {}

  const char* name() const override { return name_; }
  const char* summary() const override { return summary_; }
  std::vector<KindFlag> flags() const override { return flags_; }
  std::string config_help() const override { return config::describe<Config>(); }

  void validate_settings(const config::Json& config) const override {
    typed_config<Config>(config, "the config").validate_settings();
  }

  config::Json load_config(const config::Json& stored, const std::optional<std::filesystem::path>& file,
                           const std::vector<std::string>& overrides) const override {
    Config base = stored.is_null() ? Config{} : typed_config<Config>(stored, "run.json");
    return config::to_json(config::load<Config>(file, overrides, std::move(base)));
  }

 protected:
  const char *name_, *summary_;
  std::vector<KindFlag> flags_;
};

// Every kind, in the order `dew train --help` lists them; defined beside the rows (kinds/run_kinds.cpp),
// which sit above this interface in the layer order.
const std::vector<std::unique_ptr<RunKind>>& run_kinds();
// The row called `name`; the error names `source` (run.json, the command line) and lists the known kinds.
const RunKind& find_run_kind(const std::string& name, const std::string& source);

}  // namespace dew::runs
