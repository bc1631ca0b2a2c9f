#pragma once
// The one decoding path `dew generate` and `dew chat` share: token by token with the KV cache for a causal
// decoder (inference/generate.h), the Unmask sampler for a masked-diffusion one (model.causal = false:
// MDLM runs, LLaDA, Dream; inference/masked_generate.h). The masked sampler's own flags (--steps,
// --remasking) are refused for a causal model, and the autoregressive-only ones (--top-k, --top-p, --min-p,
// --repetition-penalty) for a masked one.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dew/inference/masked_generate.h"
#include "dew/inference/sampling.h"
#include "dew/runs/model_source.h"

namespace dew::cli {

struct MaskedFlags {
  std::optional<std::int64_t> steps;     // model evaluations per span; default MaskedSampling's (64)
  std::optional<std::string> remasking;  // random | confidence
};

// --steps and --remasking.
void add_masked_sampling_options(CLI::App* cmd, MaskedFlags& flags);

// Continuations of prompts, whichever the model's kind: rows = prompts x n, prompt i's at i*n .. i*n + n-1.
struct Continuations {
  std::int64_t n = 1;
  std::vector<std::vector<std::int32_t>> tokens;  // new tokens per row, an EOS (when reached) last
  std::vector<bool> stopped_at_eos;
  std::vector<std::vector<float>> logprobs;       // autoregressive models only (empty otherwise)
  std::vector<std::int64_t> refinements;          // masked-diffusion models only (empty otherwise)
  bool masked = false;

  std::int64_t rows() const { return static_cast<std::int64_t>(tokens.size()); }
  std::int64_t prompt_of(std::int64_t row) const { return row / n; }
};

Continuations continue_prompts(runs::LoadedModel& loaded, const std::vector<std::vector<std::int32_t>>& prompts,
                               const inference::Sampling& sampling, const MaskedFlags& masked);

}  // namespace dew::cli
