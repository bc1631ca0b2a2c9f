#pragma once
// How the next token is picked from the model's logits: the Sampling settings, the logit filters (each
// a function of its own, in the order transformers' generate applies them) and a seeded Sampler.
//
// Order, as in transformers: repetition penalty, temperature, top-k, top-p, min-p; then either the
// argmax (temperature 0: greedy; only the repetition penalty applies) or a draw from the softmax.
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace dew::inference {

struct Sampling {
  // Most continuations per prompt: each is a row of the batch (KV cache and logits); the limit keeps
  // prompts * n far from overflowing, generate() checks the memory they need.
  static constexpr std::int64_t kMaxContinuations = std::int64_t{1} << 20;

  double temperature = 1.0;         // 0 = greedy (argmax)
  std::int64_t top_k = 0;           // keep the k most likely tokens; 0 = off
  double top_p = 1.0;               // keep the smallest set whose probability reaches top_p; 1 = off
  double min_p = 0.0;               // drop tokens below min_p * the top token's probability; 0 = off
  double repetition_penalty = 1.0;  // > 1 discourages tokens already in the row (prompt + generated); 1 = off
  std::vector<std::int64_t> eos_ids;  // a row stops after producing one of these
  std::int64_t max_new_tokens = 64;
  std::int64_t n = 1;               // continuations per prompt
  std::uint64_t seed = 0;           // same seed, same prompts, same model: same tokens

  template <class V>
  void fields(V& v) {
    v("temperature", temperature, "softmax temperature; 0 = greedy");
    v("top_k", top_k, "keep only the k most likely tokens; 0 = off");
    v("top_p", top_p, "nucleus sampling: keep the smallest set of tokens whose probability reaches top_p; 1 = off");
    v("min_p", min_p, "drop tokens less likely than min_p times the most likely one; 0 = off");
    v("repetition_penalty", repetition_penalty, "CTRL penalty on tokens already in the row; 1 = off");
    v("eos_ids", eos_ids, "token ids that end a continuation (kept in the output)");
    v("max_new_tokens", max_new_tokens, "most tokens generated per continuation");
    v("n", n, "continuations per prompt");
    v("seed", seed, "seed of the sampler");
  }

  // How validate() names a setting: as a config field (sampling.top_p) or as the CLI flag (--top-p).
  enum class Names { config, flags };
  // Refuses settings that make no sense (negative, NaN, infinite, out of range) by name and value, so
  // every value that passes keeps the filters below finite.
  void validate(Names names = Names::config) const;
  bool greedy() const { return temperature == 0.0; }
};

// Each filter takes fp32 logits [rows, vocab] with a finite maximum per row and returns new logits;
// removed tokens become -inf. Every value validate() accepts keeps each row's best token finite: a NaN
// or an infinite best logit would make the draw's cumulative sum NaN.
//
// CTRL / transformers rule for every token marked in `seen` ([rows, vocab] bool): positive logits are
// divided by the penalty, negative ones multiplied by it. Computed in float64 and clamped to the fp32
// range, so a tiny or huge penalty gives +-FLT_MAX rather than infinities (or 0/0 = NaN).
at::Tensor apply_repetition_penalty(const at::Tensor& logits, const at::Tensor& seen, double penalty);
// (logits - the row's max) / temperature, divided in float64: the softmax is that of logits / temperature,
// but the best token stays at 0 for any temperature (1e-300 makes the others -inf: greedy), where plain
// division would overflow to inf and turn the softmax into NaN.
at::Tensor apply_temperature(const at::Tensor& logits, double temperature);
// Keeps every token whose logit is >= the k-th largest (ties at the k-th are kept, as in transformers).
at::Tensor apply_top_k(const at::Tensor& logits, std::int64_t k);
// Removes the tokens that transformers' rule removes (ascending cumulative probability <= 1 - top_p),
// computed as: a token stays when the probability of the tokens more likely than it is < top_p. The most
// likely token always stays.
at::Tensor apply_top_p(const at::Tensor& logits, double top_p);
// Removes tokens with probability < min_p * (the largest probability).
at::Tensor apply_min_p(const at::Tensor& logits, double min_p);

// Every filter that is on, in transformers' order (temperature is skipped when greedy). `seen` may be
// undefined when the repetition penalty is off.
at::Tensor process_logits(const at::Tensor& logits, const at::Tensor& seen, const Sampling& sampling);

// Picks tokens from processed logits. Owns its random stream (a CPU generator seeded from
// Sampling::seed) for a fixed number of rows: each pick draws one uniform number for every one of those
// rows, whether or not it is still running, so a row's draws never depend on when other rows stop. The
// draw inverts the cumulative distribution on the logits' device, so the same seed gives the same tokens
// on CPU and GPU up to the logits' rounding.
class Sampler {
 public:
  Sampler(const Sampling& sampling, std::int64_t rows);
  // processed: [k, vocab] fp32 (from process_logits) -> chosen ids [k] int64 on the same device.
  // `rows` (CPU int64 [k]) says which of the sampler's rows the k processed rows are; undefined means
  // all of them, in order. A row with no token of positive probability (all removed, or NaN logits) is a
  // dew::Error, never an id past the vocabulary.
  at::Tensor pick(const at::Tensor& processed, const at::Tensor& rows = {});
  // The uniform numbers the next pick draws: [rows, 1] float64 on the CPU, one per row of the sampler.
  at::Tensor uniforms();
  // The inverse-CDF draw of pick() for processed [k, vocab] and uniforms [k, 1] (float64): chosen ids [k]
  // int64 on the logits' device, -1 for a row with no token of positive probability.
  static at::Tensor draw(const at::Tensor& processed, const at::Tensor& uniform);

 private:
  bool greedy_;
  std::int64_t rows_;
  at::Generator generator_;
};

}  // namespace dew::inference
