#pragma once
// Generation from a masked-diffusion decoder (MDLM, LLaDA, Dream): the Unmask sampler. Each prompt is
// followed by max_new_tokens mask ids and the whole span is refined over `steps` model evaluations, the last
// of which is the clean prediction: every still-masked slot takes the model's most likely token. Before it,
// evaluation i moves the span from time t_i to t_{i+1} on the grid linspace(1, 1e-5, steps) (MDLM's, its last
// time where MDLM removes the remaining noise), revealing slots
//   random      each masked slot with probability (alpha(t_{i+1}) - alpha(t_i)) / (1 - alpha(t_i)), MDLM's
//               reverse process (_ddpm_update), its token drawn from the model's distribution;
//   confidence  as many slots as that process reveals on average (so the span is unmasked at the same pace),
//               choosing the ones whose drawn token the model is surest of: LLaDA's low-confidence remasking.
// Tokens are drawn from softmax(logits / temperature) (temperature 0: the argmax); the mask id never gets
// probability, revealed slots never change again, and the prompt never changes (a literal mask id in it
// included).
//
// Rows are prompts x n continuations, prompt i's at rows i*n .. i*n + n-1. Every row draws from its own
// generator, seeded from (seed, prompt, continuation), a fixed number of numbers per step: continuation 0 of
// a prompt is the same whatever n and whatever else is in the batch (up to float rounding of the batched
// model). EOS is applied after the whole span is refined: a row's tokens end at its first EOS (kept), the
// rest dropped; generation never stops early. max_new_tokens = 0 returns no tokens and zero refinements.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dew/inference/sampling.h"
#include "dew/nn/causal_transformer.h"
#include "dew/processes/masking_schedule.h"

namespace dew::inference {

struct MaskedSampling {
  // Past one step per new token, more steps reveal nothing (confidence) or little (random) and each is still
  // a full model evaluation; so `steps` may reach max(span, kMaxStepsWithoutTokens) and no further.
  static constexpr std::int64_t kMaxStepsWithoutTokens = 4096;

  std::int64_t steps = 64;             // model evaluations per span, the final clean prediction included
  std::string remasking = "random";    // random (MDLM) or confidence (LLaDA's low-confidence remasking)
  std::string schedule = "loglinear";  // the masking schedule the reverse process follows
  double schedule_eps = 1e-3;

  // Refuses steps < 1, steps above max(span, kMaxStepsWithoutTokens) (span = the new tokens asked for) and
  // unknown names; `flags` names them as the CLI's flags (--steps, --remasking, --max-new-tokens).
  void validate(std::int64_t span, bool flags = false) const;
};

// One row per continuation, as inference::Generation.
struct MaskedGeneration {
  std::int64_t n = 1;
  std::vector<std::vector<std::int32_t>> tokens;  // the refined span through its first EOS (kept), per row
  std::vector<std::int64_t> lengths;             // tokens[row].size()
  std::vector<bool> stopped_at_eos;              // the span holds an EOS
  std::vector<std::int64_t> refinements;         // model evaluations the row took: steps, or 0 with no new tokens

  std::int64_t rows() const { return static_cast<std::int64_t>(tokens.size()); }
  std::int64_t prompt_of(std::int64_t row) const { return row / n; }
};

// The model as the sampler sees it: the fp32 logits [rows, span, vocab] of the last `span` slots of the rows
// `inputs` holds (ids [rows, prompt + span] with positions and segment ids, 0 = left padding).
using SpanLogits = std::function<at::Tensor(const nn::DecoderInputs& inputs, std::int64_t span)>;

// Samples with any logits function (tests drive it with an oracle). `config` gives the vocabulary, the
// mask token and max_seq_len. Controls Unmask cannot follow (top_k, top_p, min_p, repetition_penalty) are
// refused by name unless neutral. Errors as generate()'s (inference/generate.h), and non-finite logits.
MaskedGeneration masked_generate_with(const SpanLogits& logits, const nn::CausalTransformerConfig& config,
                                 const std::vector<std::vector<std::int32_t>>& prompts, const Sampling& sampling,
                                 const MaskedSampling& masked, bool flag_names = false);

// With a bidirectional model (model.causal = false, a mask_token_id): no gradients, eval mode for the call.
MaskedGeneration masked_generate(nn::CausalTransformer& model, const std::vector<std::vector<std::int32_t>>& prompts,
                                 const Sampling& sampling, const MaskedSampling& masked, bool flag_names = false);

}  // namespace dew::inference
