#include "dew/runs/engine_rollouts.h"

#include <utility>

#include "dew/inference/generate.h"

namespace dew::runs {

objectives::RolloutFunction engine_rollouts() {
  return [](nn::CausalTransformer& policy, const std::vector<std::vector<std::int32_t>>& prompts,
            const objectives::RolloutRequest& request) {
    inference::Sampling sampling;
    sampling.temperature = request.temperature;
    sampling.top_p = request.top_p;
    sampling.max_new_tokens = request.max_new_tokens;
    sampling.n = request.n;
    sampling.eos_ids = request.eos_ids;
    sampling.seed = request.seed;
    inference::Generation g = inference::generate(policy, prompts, sampling);
    objectives::Rollouts out;
    out.n = g.n;
    out.tokens = std::move(g.tokens);
    out.stopped_at_eos = std::move(g.stopped_at_eos);
    return out;
  };
}

}  // namespace dew::runs
