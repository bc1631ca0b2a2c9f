#pragma once
// What `dew train KIND` does once its flags are parsed: the life cycle of a training command around a run.
//
// The config is built from, in order: the kind's defaults (a fresh run) or the run's run.json (a resumed
// run), the --config file, then each override (--data, --init-from and the kind's flags as fields, then
// --set). A resumed run may change only trainer.* (the run says which field differs otherwise).
//
// One writer per run directory: the directory is locked (core/directory_lock.h) before run.json is read,
// so a second `dew train` on it fails naming the first one's pid. A fresh run that fails before its first
// checkpoint removes what it wrote (FreshRunUndo), so the corrected command starts fresh again.
//
// Started by `dew launch` as several processes (RANK, WORLD_SIZE, ... in the environment), every process
// runs the same command: they join one process group first; rank 0 alone takes the lock, checks the
// directory and writes run.json (the effective config, --set included), while the others wait; then the
// others open the run it wrote, and all train together (training/trainer.h).
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dew/core/config.h"
#include "dew/runs/run_kind.h"
#include "dew/training/trainer.h"

namespace dew::runs {

struct TrainRequest {
  std::filesystem::path out;                       // the run directory
  std::optional<std::filesystem::path> config_file;
  std::vector<std::string> overrides;              // "section.field=value", applied in order
};

// The config the run would train with, its settings validated (RunKind::validate_settings); reads only
// (no lock, nothing created): --print-config.
config::Json effective_config(const RunKind& kind, const TrainRequest& request);

struct TrainOutcome {
  bool leader = true;  // this process speaks for the job (rank 0, or the only process)
  training::FitResult result;
  training::TrainerConfig trainer;
};

// Starts or resumes the run and trains it; rank 0 (or the only process) prints "new run ..."/"resuming
// run ..." and the trainer's progress to `out`. Leaves the process group before returning.
TrainOutcome train_run(const RunKind& kind, const TrainRequest& request, std::FILE* out);

}  // namespace dew::runs
