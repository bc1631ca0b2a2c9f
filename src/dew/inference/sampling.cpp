#include "dew/inference/sampling.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "dew/core/error.h"

namespace dew::inference {

void Sampling::validate(Names names) const {
  // The field's name as the user gave it: "sampling.top_p" in a config, "--top-p" on the command line.
  auto name = [names](std::string field) {
    if (names == Names::config) return "sampling." + field;
    std::replace(field.begin(), field.end(), '_', '-');
    return "--" + field;
  };
  // !(a <= x) rather than x < a, so that NaN is refused too.
  if (!(temperature >= 0.0 && std::isfinite(temperature))) {
    dew::fail(name("temperature"), " is ", temperature, "; use 0 (greedy) or a positive finite number");
  }
  if (top_k < 0) dew::fail(name("top_k"), " is ", top_k, "; use 0 (off) or a positive count");
  if (!(top_p > 0.0 && top_p <= 1.0)) dew::fail(name("top_p"), " is ", top_p, "; use a value in (0, 1] (1 = off)");
  if (!(min_p >= 0.0 && min_p <= 1.0)) dew::fail(name("min_p"), " is ", min_p, "; use a value in [0, 1] (0 = off)");
  if (!(repetition_penalty > 0.0 && std::isfinite(repetition_penalty))) {
    dew::fail(name("repetition_penalty"), " is ", repetition_penalty, "; use a positive finite number (1 = off)");
  }
  if (max_new_tokens < 1) dew::fail(name("max_new_tokens"), " is ", max_new_tokens, "; use at least 1");
  if (n < 1) dew::fail(name("n"), " is ", n, "; use at least 1 continuation per prompt");
  if (n > kMaxContinuations) {
    dew::fail(name("n"), " is ", n, "; use at most ", kMaxContinuations, " continuations per prompt");
  }
}

namespace {
constexpr double kRemoved = -std::numeric_limits<double>::infinity();
constexpr double kLargest = std::numeric_limits<float>::max();
}

at::Tensor apply_repetition_penalty(const at::Tensor& logits, const at::Tensor& seen, double penalty) {
  if (penalty == 1.0) return logits;
  // In fp32 a penalty of 1e-300 is 0: x / 0 = inf and 0 / 0 = NaN. In float64 x / 1e-300 is finite (and
  // the clamp catches the rest), so the result is ordered like the exact one up to the fp32 range.
  auto wide = logits.to(at::kDouble);
  auto penalized = at::where(wide < 0, wide * penalty, wide / penalty).clamp(-kLargest, kLargest).to(logits.scalar_type());
  return at::where(seen, penalized, logits);
}

at::Tensor apply_temperature(const at::Tensor& logits, double temperature) {
  if (temperature == 1.0) return logits;
  // The max stays exactly 0; the others, <= 0, fall to -inf at worst (a probability that is 0 anyway).
  auto shifted = (logits - std::get<0>(logits.max(-1, /*keepdim=*/true))).to(at::kDouble);
  return (shifted / temperature).to(logits.scalar_type());
}

at::Tensor apply_top_k(const at::Tensor& logits, std::int64_t k) {
  auto vocab = logits.size(-1);
  if (k <= 0 || k >= vocab) return logits;
  auto kth = std::get<0>(at::topk(logits, k, -1)).narrow(-1, k - 1, 1);
  return logits.masked_fill(logits < kth, kRemoved);
}

at::Tensor apply_top_p(const at::Tensor& logits, double top_p) {
  if (top_p >= 1.0) return logits;
  // transformers sorts the whole vocabulary ascending and removes a token when the cumulative sum up to
  // it is <= 1 - top_p, that is (in exact arithmetic) when the mass of the tokens above it is >= top_p.
  // Only the head of the distribution can survive, so this looks at the top k tokens, doubling k until
  // every row's kept set ends inside them: a full sort of a 50k vocabulary costs ~10x more.
  auto vocab = logits.size(-1);
  auto probs = at::softmax(logits, -1);
  // (Past a quarter of the vocabulary one full sort is cheaper than another partial one.)
  for (std::int64_t k = std::min<std::int64_t>(vocab, 128);; k = 8 * k > vocab ? vocab : 2 * k) {
    auto [top, order] = at::topk(probs, k, -1, /*largest=*/true, /*sorted=*/true);
    auto keep_sorted = (top.cumsum(-1) - top) < top_p;  // the most likely token (mass above 0) always stays
    if (k == vocab || !keep_sorted.narrow(-1, k - 1, 1).any().item<bool>()) {
      auto remove = at::ones_like(probs, at::TensorOptions().dtype(at::kBool)).scatter(-1, order, keep_sorted.logical_not());
      return logits.masked_fill(remove, kRemoved);
    }
  }
}

at::Tensor apply_min_p(const at::Tensor& logits, double min_p) {
  if (min_p <= 0.0) return logits;
  auto probs = at::softmax(logits, -1);
  auto threshold = std::get<0>(probs.max(-1, /*keepdim=*/true)) * min_p;
  return logits.masked_fill(probs < threshold, kRemoved);
}

at::Tensor process_logits(const at::Tensor& logits, const at::Tensor& seen, const Sampling& s) {
  auto out = s.repetition_penalty != 1.0 ? apply_repetition_penalty(logits, seen, s.repetition_penalty) : logits;
  if (s.greedy()) return out;  // the warpers below only shape a distribution to draw from
  out = apply_temperature(out, s.temperature);
  out = apply_top_k(out, s.top_k);
  out = apply_top_p(out, s.top_p);
  return apply_min_p(out, s.min_p);
}

Sampler::Sampler(const Sampling& sampling, std::int64_t rows)
    : greedy_(sampling.greedy()), rows_(rows), generator_(at::make_generator<at::CPUGeneratorImpl>(sampling.seed)) {}

at::Tensor Sampler::pick(const at::Tensor& processed, const at::Tensor& rows) {
  if (processed.dim() != 2) dew::fail("Sampler::pick expects [rows, vocab] logits, got ", processed.sizes());
  auto k = processed.size(0), vocab = processed.size(1);
  if (rows.defined() ? rows.numel() != k : k != rows_) {
    dew::fail("Sampler::pick got ", k, " rows of logits for a stream of ", rows_, " rows",
              rows.defined() ? dew::str(" and ", rows.numel(), " row indices") : std::string());
  }
  if (greedy_) return processed.argmax(-1);
  auto uniform = uniforms();
  if (rows.defined()) uniform = uniform.index_select(0, rows);
  auto chosen = draw(processed, uniform);
  if (!(chosen >= 0).all().item<bool>()) {
    dew::fail("Sampler::pick got a row of logits with no token of positive probability (all removed, or NaN)");
  }
  return chosen;
}

at::Tensor Sampler::uniforms() { return at::rand({rows_, 1}, generator_, at::TensorOptions().dtype(at::kDouble)); }

at::Tensor Sampler::draw(const at::Tensor& processed, const at::Tensor& uniform) {
  const auto vocab = processed.size(1);
  // Inverse CDF in float64: u ~ U[0, 1) scaled by the total picks the first token whose cumulative
  // probability exceeds it, so a token of probability 0 (filtered) is never picked.
  auto probs = at::softmax(processed, -1, at::kDouble);
  auto cumulative = probs.cumsum(-1);
  // Kept strictly below the total, so that rounding cannot push the target past the last token that
  // has probability (whose cumulative sum is the total).
  auto total = cumulative.narrow(-1, vocab - 1, 1);
  auto target = at::minimum(uniform.to(processed.device()) * total, total * (1.0 - 1e-12));
  auto chosen = at::searchsorted(cumulative, target, /*out_int32=*/false, /*right=*/true).squeeze(-1);
  // NaN logits, or every token removed, leave no distribution (searchsorted would return `vocab`).
  return at::where((total > 0).squeeze(-1), chosen, at::full_like(chosen, -1));
}

}  // namespace dew::inference
