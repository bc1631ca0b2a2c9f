#include "dew/runs/run_life_cycle.h"

#include <system_error>

#include "dew/core/error.h"
#include "dew/training/checkpoint.h"

namespace fs = std::filesystem;

namespace dew::runs {

RunFile read_run_to_resume(const fs::path& run_dir, const std::string& kind) {
  RunFile stored = read_run_file(run_dir);
  refuse_other_kind(run_dir, stored, kind);
  return stored;
}

void refuse_other_kind(const fs::path& run_dir, const RunFile& stored, const std::string& kind) {
  if (stored.kind == kind) return;
  fail("'", run_dir.string(), "' holds a \"", stored.kind, "\" run; `dew train ", kind, "` cannot resume it. Resume it with `dew train ",
       stored.kind, "` or start this run in another --out directory");
}

void record_resumed_config(const fs::path& run_dir, RunFile& stored, const config::Json& stored_canonical, const config::Json& asked) {
  // Everything but trainer.* rebuilds the model, data order and optimizer the checkpoints were made with.
  check_resume_config(run_dir, stored_canonical, asked);
  stored.config = asked;
  write_run_file(run_dir, stored);
}

fs::path checkpoint_to_load(const fs::path& run_dir, std::optional<std::int64_t> step) {
  if (!step) return run_dir;
  const fs::path checkpoint = run_dir / std::to_string(*step);
  std::error_code ec;
  if (!fs::is_directory(checkpoint, ec)) {
    std::string have;
    for (auto st : training::checkpoint_steps(run_dir)) have += (have.empty() ? "" : ", ") + std::to_string(st);
    fail("run '", run_dir.string(), "' has no checkpoint of step ", *step, "; it has: ", have.empty() ? "none" : have);
  }
  return checkpoint;
}

}  // namespace dew::runs
