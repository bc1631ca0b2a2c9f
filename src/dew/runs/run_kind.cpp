// Finding a row of the run-kind table (run_kind.h) and opening a run by its kind. The table itself is
// defined beside its rows, in kinds/run_kinds.cpp.
#include "dew/runs/run_kind.h"

#include "dew/core/error.h"

namespace dew::runs {

const RunKind& find_run_kind(const std::string& name, const std::string& source) {
  std::string known;
  for (const auto& kind : run_kinds()) {
    if (kind->name() == name) return *kind;
    known += str(known.empty() ? "" : ", ", kind->name());
  }
  fail(source, ": run kind \"", name, "\" is not one this dew knows (", known, "); was the run written by a newer dew?");
}

std::unique_ptr<Run> open_run(const std::filesystem::path& run_dir) {
  const RunFile file = read_run_file(run_dir);
  return find_run_kind(file.kind, run_file_path(run_dir).string()).open(run_dir, file);
}

std::unique_ptr<Run> open_run(const ModelSource& source) {
  if (source.kind != ModelSourceKind::run) {
    fail("'", source.path.string(), "' is a ", model_source_kind_name(source.kind), " checkpoint, not a run directory (no run.json)");
  }
  return find_run_kind(source.run->kind, run_file_path(source.path).string()).open(source.path, *source.run);
}

}  // namespace dew::runs
