#pragma once
// The steps of a run directory's life cycle that every run family takes the same way (decoder_run.h,
// image_run.h): resuming (the kind must match, only trainer.* may change) and choosing the checkpoint a
// command loads. A family adds its own checks between them, never a copy of these.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "dew/core/config.h"
#include "dew/runs/run_directory.h"

namespace dew::runs {

// run.json of the run `dew train KIND` is about to resume; a run of another kind is refused, naming both
// and what to do.
RunFile read_run_to_resume(const std::filesystem::path& run_dir, const std::string& kind);
// The same check on a run.json read already.
void refuse_other_kind(const std::filesystem::path& run_dir, const RunFile& stored, const std::string& kind);

// A resumed run's config: only trainer.* may differ between `stored_canonical` (run.json's config in the
// task's canonical form) and `asked` (check_resume_config); then `asked` is recorded in run.json.
void record_resumed_config(const std::filesystem::path& run_dir, RunFile& stored, const config::Json& stored_canonical,
                           const config::Json& asked);

// The directory whose weights a command loads: the run directory (its newest checkpoint) or step N's,
// refused naming the steps the run has.
std::filesystem::path checkpoint_to_load(const std::filesystem::path& run_dir, std::optional<std::int64_t> step);

}  // namespace dew::runs
