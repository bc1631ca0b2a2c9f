#pragma once
// GRPO's rollouts through the decoding engine: the RolloutFunction a GRPO run hands its objective
// (objectives sit below inference, so the run, which knows both, joins them).
#include "dew/objectives/rollout.h"

namespace dew::runs {

// Each request becomes inference::generate's Sampling (top_k, min_p and the repetition penalty off).
objectives::RolloutFunction engine_rollouts();

}  // namespace dew::runs
