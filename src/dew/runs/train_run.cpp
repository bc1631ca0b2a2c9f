#include "dew/runs/train_run.h"

#include <chrono>
#include <memory>
#include <system_error>
#include <utility>

#include "dew/core/atomic_file.h"
#include "dew/core/directory_lock.h"
#include "dew/core/error.h"
#include "dew/distributed/process_group.h"
#include "dew/distributed/torch_threads.h"
#include "dew/nn/device.h"
#include "dew/runs/run_directory.h"

namespace dew::runs {
namespace fs = std::filesystem;
namespace {

// Joins the job's process group, with the trainer's device and timeout, before anyone waits on anyone.
void join_job(const RunKind& kind, const TrainRequest& request) {
  auto config = effective_config(kind, request);
  training::TrainerConfig trainer;
  if (config.contains("trainer")) config::from_json(config["trainer"], trainer, "the trainer section");
  trainer.validate();  // trainer.parallel, and a batch that splits over the processes, before anyone waits
  distributed::join_process_group(nn::resolve_device(trainer.device),
                                  std::chrono::milliseconds(static_cast<std::int64_t>(trainer.timeout_seconds * 1000)));
}

// A rank other than 0: waits for rank 0 to set the run directory up, then trains the run it wrote.
TrainOutcome follow_leader(const fs::path& out) {
  distributed::process_group()->barrier("waiting for rank 0 to set up the run directory");
  distributed::use_available_threads();
  std::unique_ptr<Run> run = open_run(out);
  TrainOutcome outcome{.leader = false, .result = run->train(nullptr), .trainer = run->trainer_config()};
  distributed::leave_process_group();
  return outcome;
}

// The directory a leader trains in, held for the whole command: its lock and, for a fresh run, the undo
// of what the start writes (released first: members are destroyed in reverse order).
struct ClaimedRunDirectory {
  std::unique_ptr<DirectoryLock> lock;
  std::unique_ptr<FreshRunUndo> undo;  // null for a resumed run
};

// Locks the directory and, for a fresh run, checks it and arms the undo. Whether the run is fresh or
// resumed is decided by run.json, which only the lock's holder writes.
ClaimedRunDirectory claim_run_directory(const fs::path& out) {
  std::error_code ec;
  const bool existed = fs::exists(out, ec);
  const bool had_lock_file = fs::exists(out / DirectoryLock::kFileName, ec);
  ClaimedRunDirectory claim{.lock = std::make_unique<DirectoryLock>(out), .undo = nullptr};
  if (holds_run(out)) {
    remove_stale_temporaries(out);  // run.json and checkpoint temporaries of a writer that was killed
    return claim;
  }
  // A lock file means dew wrote here before: temporaries of a start that was killed are its own.
  if (had_lock_file) remove_stale_temporaries(out);
  try {
    check_fresh_run_dir(out);
  } catch (const Error&) {
    if (!had_lock_file) fs::remove(out / DirectoryLock::kFileName, ec);  // not our directory
    throw;
  }
  claim.undo = std::make_unique<FreshRunUndo>(out, /*created_dir=*/!existed);
  return claim;
}

}  // namespace

config::Json effective_config(const RunKind& kind, const TrainRequest& request) {
  // Defaults for a fresh run; run.json's config when resuming (a run of another kind is refused by start).
  config::Json stored;
  if (holds_run(request.out)) {
    RunFile file = read_run_file(request.out);
    if (file.kind == kind.name()) stored = std::move(file.config);
  }
  config::Json config = kind.load_config(stored, request.config_file, request.overrides);
  kind.validate_settings(config);
  return config;
}

TrainOutcome train_run(const RunKind& kind, const TrainRequest& request, std::FILE* out) {
  const auto& place = distributed::process_place();
  if (place.multi_process()) {
    join_job(kind, request);
    if (place.rank != 0) return follow_leader(request.out);
  }
  ClaimedRunDirectory claim = claim_run_directory(request.out);
  const config::Json config = effective_config(kind, request);
  distributed::use_available_threads();
  std::unique_ptr<Run> run = kind.start(request.out, config);
  std::fprintf(out, "%s run '%s' (%s): %s\n", run->resumed() ? "resuming" : "new", request.out.c_str(), kind.name(),
               run->describe().c_str());
  std::fflush(out);
  if (auto* group = distributed::process_group()) group->barrier("rank 0 setting up the run directory");
  TrainOutcome outcome{.leader = true, .result = run->train(out), .trainer = run->trainer_config()};
  if (claim.undo) claim.undo->keep();  // the run trained (or, with trainer.steps = 0, proved it can start)
  distributed::leave_process_group();
  return outcome;
}

}  // namespace dew::runs
