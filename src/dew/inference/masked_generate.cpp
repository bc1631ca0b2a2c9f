#include "dew/inference/masked_generate.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "dew/core/error.h"
#include "dew/core/stream_seed.h"
#include "dew/inference/generate.h"

namespace dew::inference {

namespace {

using processes::MaskingSchedule;
using processes::parse_schedule;

constexpr std::uint64_t kPurpose = 0x756e6d61736b6572ULL;  // "unmasker"
// MDLM's last sampling time, where it removes the noise left (the final clean prediction).
constexpr double kNoiseRemovalTime = 1e-5;

void refuse_autoregressive_controls(const Sampling& s, bool flags) {
  auto refuse = [&](const char* flag, const char* field, const std::string& value) {
    fail(flags ? flag : field, " is ", value, ", but masked-diffusion models generate with the Unmask sampler, which "
         "refines the whole span at once and cannot follow it; leave it at its default");
  };
  if (s.top_k != 0) refuse("--top-k", "sampling.top_k", std::to_string(s.top_k));
  if (s.top_p != 1.0) refuse("--top-p", "sampling.top_p", str(s.top_p));
  if (s.min_p != 0.0) refuse("--min-p", "sampling.min_p", str(s.min_p));
  if (s.repetition_penalty != 1.0) refuse("--repetition-penalty", "sampling.repetition_penalty", str(s.repetition_penalty));
}

// Token ids drawn from softmax(logits / temperature) by inverting the cumulative distribution with one
// uniform number per slot, or the argmax at temperature 0. logits [k, V] fp32 with -inf at the mask id.
at::Tensor draw_tokens(const at::Tensor& logits, double temperature, const at::Tensor& uniforms) {
  if (temperature == 0.0) return logits.argmax(-1);
  auto probs = at::softmax(logits.to(at::kDouble) / temperature, -1);
  auto cdf = probs.cumsum(-1);
  // u scaled by the row's total guards against a total a rounding below 1.
  auto target = uniforms.to(cdf.device(), at::kDouble).unsqueeze(1) * cdf.select(1, cdf.size(1) - 1).unsqueeze(1);
  auto ids = at::searchsorted(cdf, target, /*out_int32=*/false, /*right=*/true).squeeze(1);
  // u < 1, so target < the total and the first cdf entry above it exists: a token of positive probability.
  return ids.clamp_max(cdf.size(1) - 1);
}

}  // namespace

void MaskedSampling::validate(std::int64_t span, bool flags) const {
  if (steps < 1) fail(flags ? "--steps" : "masked.steps", " must be at least 1 (the final clean prediction), got ", steps);
  const std::int64_t most = std::max(span, kMaxStepsWithoutTokens);
  if (steps > most) {
    fail(flags ? "--steps" : "masked.steps", " is ", steps, "; use at most ", most, " (the larger of the ", span,
         " tokens to generate (", flags ? "--max-new-tokens" : "sampling.max_new_tokens", ") and ", kMaxStepsWithoutTokens,
         "): every step is a model evaluation of the whole span, and past one step per token, confidence "
         "remasking's further steps reveal nothing and random remasking's mostly nothing");
  }
  if (remasking != "random" && remasking != "confidence") {
    fail(flags ? "--remasking" : "masked.remasking", " is '", remasking, "'; use random (MDLM) or confidence (LLaDA's "
         "low-confidence remasking)");
  }
  parse_schedule(schedule, flags ? "--schedule" : "masked.schedule");
}

namespace {

// A mask token, no autoregressive controls, valid masked settings, and room for prompt plus span.
void check_masked_request(const nn::CausalTransformerConfig& config, const std::vector<std::vector<std::int32_t>>& prompts,
                          const Sampling& sampling, const MaskedSampling& masked, bool flag_names) {
  const std::int64_t mask_id = config.mask_token_id;
  if (mask_id < 0 || mask_id >= config.vocab_size) {
    fail("masked generation needs the model's mask token, but model.mask_token_id is ", mask_id,
         "; is this an autoregressive model? (generate with it as usual)");
  }
  refuse_autoregressive_controls(sampling, flag_names);
  masked.validate(sampling.max_new_tokens, flag_names);
  // Zero new tokens is a valid request here (the prompt back, no refinement); the shared checks want one.
  Sampling checked = sampling;
  nn::CausalTransformerConfig room = config;
  if (checked.max_new_tokens == 0) {
    checked.max_new_tokens = 1;
    room.max_seq_len += 1;
  }
  check_generation_request(room, prompts, checked);
}

// The model's input: each prompt (n rows of it) left-padded (segment 0), then the span of mask ids;
// positions count from each prompt's first token.
struct MaskedRows {
  at::Tensor ids, positions, segments;
  std::int64_t longest = 0;  // the longest prompt: the span starts here
  bool padded = false;
};

MaskedRows masked_rows(const std::vector<std::vector<std::int32_t>>& prompts, std::int64_t n, std::int64_t span,
                       std::int64_t mask_id) {
  MaskedRows out;
  const std::int64_t rows = static_cast<std::int64_t>(prompts.size()) * n;
  for (const auto& p : prompts) out.longest = std::max(out.longest, static_cast<std::int64_t>(p.size()));
  const std::int64_t width = out.longest + span;
  out.ids = at::full({rows, width}, mask_id, at::kLong);
  out.positions = at::zeros({rows, width}, at::kLong);
  out.segments = at::zeros({rows, width}, at::kLong);
  auto id = out.ids.accessor<std::int64_t, 2>();
  auto pos = out.positions.accessor<std::int64_t, 2>();
  auto seg = out.segments.accessor<std::int64_t, 2>();
  for (std::int64_t row = 0; row < rows; ++row) {
    const auto& prompt = prompts[static_cast<std::size_t>(row / n)];
    const auto length = static_cast<std::int64_t>(prompt.size()), pad = out.longest - length;
    out.padded = out.padded || pad > 0;
    for (std::int64_t j = 0; j < pad; ++j) id[row][j] = 0;
    for (std::int64_t j = 0; j < length + span; ++j) {
      if (j < length) id[row][pad + j] = prompt[static_cast<std::size_t>(j)];
      pos[row][pad + j] = j;
      seg[row][pad + j] = 1;
    }
  }
  return out;
}

// One refinement before the last: which still-masked slots it reveals, and the tokens drawn for them.
struct Revealed {
  at::Tensor reveal;  // [rows, span] bool
  at::Tensor drawn;   // [rows * span] ids (0 where nothing was drawn)
};

// Step i of masked.steps over `flat` logits [rows * span, V] with this step's `draws` [2, rows, span].
Revealed reveal_step(const at::Tensor& flat, const at::Tensor& draws, const at::Tensor& still_masked, std::int64_t i,
                     const MaskedSampling& masked, const MaskingSchedule& schedule, double temperature) {
  const std::int64_t rows = still_masked.size(0), span = still_masked.size(1);
  const double full = 1 - schedule.alpha(1.0);  // the masked fraction at t = 1
  const double t = 1.0 + (kNoiseRemovalTime - 1.0) * static_cast<double>(i) / static_cast<double>(masked.steps - 1);
  const double s = 1.0 + (kNoiseRemovalTime - 1.0) * static_cast<double>(i + 1) / static_cast<double>(masked.steps - 1);
  const double alpha_t = schedule.alpha(t), alpha_s = schedule.alpha(s);
  // Tokens are drawn only where they can be used: the slots this step reveals (random), or every slot
  // still masked (confidence, which ranks them by their drawn token's probability). The softmax and
  // cumulative sums over the vocabulary are most of the sampler's own work.
  const auto token_uniforms = draws[1].reshape(-1);
  Revealed out{at::Tensor(), at::zeros({rows * span}, at::kLong)};
  if (masked.remasking == "random") {
    const double chance = (alpha_s - alpha_t) / (1 - alpha_t);
    out.reveal = still_masked & (draws[0] < chance);
    const auto picked = out.reveal.reshape(-1).nonzero().squeeze(1);
    out.drawn.index_copy_(0, picked, draw_tokens(flat.index_select(0, picked), temperature, token_uniforms.index_select(0, picked)));
    return out;
  }
  // As many as the reverse process reveals on average: the expected masked count at s is span times the
  // masked fraction there, relative to the fully masked start.
  const auto keep_masked = static_cast<std::int64_t>(std::llround(static_cast<double>(span) * (1 - alpha_s) / full));
  const auto count = (still_masked.sum(1) - keep_masked).clamp_min(0);
  const auto picked = still_masked.reshape(-1).nonzero().squeeze(1);
  const auto candidates = flat.index_select(0, picked);
  const auto tokens = draw_tokens(candidates, temperature, token_uniforms.index_select(0, picked));
  out.drawn.index_copy_(0, picked, tokens);
  auto confidence = at::full({rows * span}, -1.0, at::kDouble);
  confidence.index_copy_(0, picked, at::softmax(candidates, -1).gather(1, tokens.unsqueeze(1)).squeeze(1).to(at::kDouble));
  const auto order = confidence.view({rows, span}).argsort(/*stable=*/true, 1, /*descending=*/true);
  const auto rank = at::empty_like(order).scatter_(1, order, at::arange(span, order.options()).expand({rows, span}));
  out.reveal = still_masked & (rank < count.unsqueeze(1));
  return out;
}

// EOS after refinement: each row of the refined span [rows, span] ends at its first EOS, which it keeps.
void collect_rows(const at::Tensor& span_ids, const Sampling& sampling, std::int64_t refinements, MaskedGeneration& out) {
  const std::int64_t rows = span_ids.size(0), span = span_ids.size(1);
  const auto refined = span_ids.contiguous();
  const auto* data = refined.data_ptr<std::int64_t>();
  for (std::int64_t row = 0; row < rows; ++row) {
    std::vector<std::int32_t> tokens;
    bool eos = false;
    for (std::int64_t j = 0; j < span && !eos; ++j) {
      const auto id = data[row * span + j];
      tokens.push_back(static_cast<std::int32_t>(id));
      for (auto e : sampling.eos_ids) eos = eos || id == e;
    }
    out.lengths.push_back(static_cast<std::int64_t>(tokens.size()));
    out.tokens.push_back(std::move(tokens));
    out.stopped_at_eos.push_back(eos);
    out.refinements.push_back(refinements);
  }
}

}  // namespace

MaskedGeneration masked_generate_with(const SpanLogits& span_logits, const nn::CausalTransformerConfig& config,
                                 const std::vector<std::vector<std::int32_t>>& prompts, const Sampling& sampling,
                                 const MaskedSampling& masked, bool flag_names) {
  check_masked_request(config, prompts, sampling, masked, flag_names);
  const std::int64_t mask_id = config.mask_token_id;
  const std::int64_t n = sampling.n, rows = static_cast<std::int64_t>(prompts.size()) * n;
  const std::int64_t span = sampling.max_new_tokens;
  MaskedGeneration out;
  out.n = n;
  if (span == 0) {
    out.tokens.assign(rows, {});
    out.lengths.assign(rows, 0);
    out.stopped_at_eos.assign(rows, false);
    out.refinements.assign(rows, 0);
    return out;
  }
  MaskedRows input = masked_rows(prompts, n, span, mask_id);

  // One generator per row, seeded by (seed, prompt, continuation); each step draws 2 * span numbers from it.
  std::vector<at::Generator> generators;
  for (std::int64_t row = 0; row < rows; ++row) {
    generators.push_back(at::make_generator<at::CPUGeneratorImpl>(stream_seed(sampling.seed, kPurpose, row / n, row % n)));
  }
  auto uniforms = [&] {
    std::vector<at::Tensor> drawn;
    for (auto& g : generators) drawn.push_back(at::rand({2, span}, g, at::kDouble));
    return at::stack(drawn, 1);  // [2, rows, span]: reveal draws, token draws
  };

  const MaskingSchedule schedule(parse_schedule(masked.schedule, "masked.schedule"), masked.schedule_eps);
  auto span_ids = input.ids.narrow(1, input.longest, span);  // a view: writes land in `ids`
  auto still_masked = at::ones({rows, span}, at::kBool);
  nn::DecoderInputs inputs{input.ids, input.positions, input.padded ? input.segments : at::Tensor()};
  for (std::int64_t i = 0; i < masked.steps; ++i) {
    at::Tensor logits = span_logits(inputs, span).to(at::kCPU, at::kFloat);
    // -inf is allowed (a model may rule tokens out); NaN and +inf are not, and both show in the maximum.
    const double top = logits.max().item<double>();
    if (std::isnan(top) || top == std::numeric_limits<double>::infinity()) {
      fail("the model produced non-finite logits at refinement ", i + 1, " of ", masked.steps, "; its weights may hold NaN/Inf");
    }
    logits.select(2, mask_id).fill_(-std::numeric_limits<float>::infinity());
    const auto flat = logits.reshape({rows * span, -1});
    if (i == masked.steps - 1) {  // the clean prediction: every slot still masked takes the argmax
      span_ids.copy_(at::where(still_masked, flat.argmax(-1).view({rows, span}), span_ids));
      break;
    }
    const auto draws = uniforms();  // every row's numbers are drawn whichever slots use them
    const Revealed step = reveal_step(flat, draws, still_masked, i, masked, schedule, sampling.temperature);
    span_ids.copy_(at::where(step.reveal, step.drawn.view({rows, span}), span_ids));
    still_masked &= step.reveal.logical_not();
  }
  collect_rows(span_ids, sampling, masked.steps, out);
  return out;
}

MaskedGeneration masked_generate(nn::CausalTransformer& model, const std::vector<std::vector<std::int32_t>>& prompts,
                                 const Sampling& sampling, const MaskedSampling& masked, bool flag_names) {
  const auto& config = model->config();
  if (config.causal) {
    fail("masked generation needs a bidirectional model (model.causal = false): this model is causal; it generates "
         "token by token (`dew generate` without --steps)");
  }
  at::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const auto device = model->output_weight().device();
  auto logits = [&](const nn::DecoderInputs& in, std::int64_t span) {
    nn::DecoderInputs on_device{in.ids.to(device), in.positions.to(device),
                                in.segment_ids.defined() ? in.segment_ids.to(device) : at::Tensor()};
    auto hidden = model->token_prediction_states(model->hidden_states(on_device));
    // Only the span's slots are drawn from, so only they go through the head.
    return model->logits(hidden.narrow(1, hidden.size(1) - span, span));
  };
  try {
    auto out = masked_generate_with(logits, config, prompts, sampling, masked, flag_names);
    model->train(was_training);
    return out;
  } catch (...) {
    model->train(was_training);
    throw;
  }
}

}  // namespace dew::inference
