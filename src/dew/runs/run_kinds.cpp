// The table of run kinds (run_kind.h) and opening a run by its kind.
#include "dew/core/error.h"
#include "dew/runs/kinds/classifier_kind.h"
#include "dew/runs/kinds/diffusion_kind.h"
#include "dew/runs/kinds/dpo_kind.h"
#include "dew/runs/kinds/grpo_kind.h"
#include "dew/runs/kinds/jepa_kind.h"
#include "dew/runs/kinds/lm_kind.h"
#include "dew/runs/kinds/mdlm_kind.h"
#include "dew/runs/kinds/sft_kind.h"
#include "dew/runs/run_kind.h"

namespace dew::runs {

const std::vector<std::unique_ptr<RunKind>>& run_kinds() {
  static const std::vector<std::unique_ptr<RunKind>> table = [] {
    std::vector<std::unique_ptr<RunKind>> kinds;
    kinds.push_back(make_lm_kind());
    kinds.push_back(make_sft_kind());
    kinds.push_back(make_dpo_kind());
    kinds.push_back(make_grpo_kind());
    kinds.push_back(make_mdlm_kind());
    kinds.push_back(make_diffusion_kind());
    kinds.push_back(make_classifier_kind());
    kinds.push_back(make_jepa_kind());
    return kinds;
  }();
  return table;
}

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

}  // namespace dew::runs
