#include "dew/cli/decoding.h"

#include "dew/core/error.h"
#include "dew/inference/generate.h"

namespace dew::cli {

void add_masked_sampling_options(CLI::App* cmd, MaskedFlags& flags) {
  cmd->add_option("--steps", flags.steps,
                  "masked-diffusion models: model evaluations that refine the whole span, the final clean prediction "
                  "included (" + std::to_string(inference::MaskedSampling{}.steps) + "; at most the larger of --max-new-tokens and " +
                  std::to_string(inference::MaskedSampling::kMaxStepsWithoutTokens) + ")");
  cmd->add_option("--remasking", flags.remasking,
                  "masked-diffusion models: which masked slots each step reveals: random (MDLM's reverse process, the "
                  "default) or confidence (LLaDA's low-confidence remasking)");
}

Continuations continue_prompts(runs::LoadedModel& loaded, const std::vector<std::vector<std::int32_t>>& prompts,
                               const inference::Sampling& sampling, const MaskedFlags& masked) {
  Continuations out;
  out.n = sampling.n;
  if (loaded.model->config().causal) {
    if (masked.steps || masked.remasking) {
      fail(masked.steps ? "--steps" : "--remasking", " applies to masked-diffusion models, but ", loaded.description,
           " is an autoregressive (causal) decoder that generates token by token; leave it out");
    }
    auto g = inference::generate(loaded.model, prompts, sampling);
    out.tokens = std::move(g.tokens);
    out.stopped_at_eos = std::move(g.stopped_at_eos);
    out.logprobs = std::move(g.logprobs);
    return out;
  }
  inference::MaskedSampling settings;
  if (masked.steps) settings.steps = *masked.steps;
  if (masked.remasking) settings.remasking = *masked.remasking;
  auto g = inference::masked_generate(loaded.model, prompts, sampling, settings, /*flag_names=*/true);
  out.masked = true;
  out.tokens = std::move(g.tokens);
  out.stopped_at_eos = std::move(g.stopped_at_eos);
  out.refinements = std::move(g.refinements);
  return out;
}

}  // namespace dew::cli
