// The table of run kinds (declared in run_kind.h): one row per kind in this folder. A new kind is a few
// files here and a line below; the commands need no change.
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

}  // namespace dew::runs
