#pragma once
// Helpers for the training tests: the fixture decoders, a tiny decoder, a tiny token directory, and a batch
// source that repeats one batch.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <filesystem>
#include <random>
#include <string>

#include "dew/core/config.h"
#include "dew/data/batch_source.h"
#include "dew/formats/safetensors.h"
#include "dew/nn/causal_transformer.h"
#include "dew/nn/parameters.h"
#include "test_support.h"
#include "token_test_support.h"

namespace dew::test {

// How close dew's parameters after the fixtures' 10 AdamW steps (lr 0.01) must be to PyTorch's, as a norm
// per tensor relative to how far PyTorch moved that tensor: ||p_dew - p_torch|| / ||p_torch - p_initial||.
//
// Why a relative norm and not each element: Adam divides every gradient element by its own running RMS,
// so an element whose gradient is ~0 moves by up to lr per step in the direction of its float32 rounding
// noise. That noise depends on the CPU's kernels (summation order, FMA, AVX2 against AVX-512), not on the
// implementation, so no elementwise bound holds on every x86-64 CPU (the worst element differed by 1.6e-5
// on one AMD EPYC, 8e-5 on an Intel Xeon and 2.6e-4 on another AMD EPYC with AVX-512, for the same code).
// Over a whole tensor those few elements are outweighed by the well-conditioned rest, whose relative
// error is that of float32 gradients (a few ulps, 1e-7..1e-6) carried through ten steps. Measured
// (AMD EPYC with AVX-512, DEW_PRINT_ADAMW=1 build/tests/dew_tests --gtest_filter='Optimizer.AdamW*'): the
// worst tensor 3.7e-5, most 1e-6..1e-5. The bound sits 27x above that and 5x below the smallest real
// defect tested (Optimizer.AdamWComparisonCatchesAMissingWeightDecay): without weight decay the decayed
// matrices land at 5.4e-3..2.3e-2.
inline constexpr double kAdamWRelativeTolerance = 1e-3;
// The losses: a float32 mean cross entropy of ~2-4 over 10 steps whose parameters agree as above;
// measured worst 1.05e-5.
inline constexpr double kAdamWLossTolerance = 5e-5;

// ||p - reference|| / ||reference - initial||, in float64 (see kAdamWRelativeTolerance).
inline double adamw_relative_difference(const at::Tensor& p, const at::Tensor& reference, const at::Tensor& initial) {
  const auto ref = reference.to(at::kDouble);
  const double moved = (ref - initial.to(at::kDouble)).norm().item<double>();
  return (p.to(at::kDouble) - ref).norm().item<double>() / moved;
}

inline nn::CausalTransformer fixture_decoder(const std::string& family) {
  nn::CausalTransformerConfig config;
  auto dir = fixtures() / "lm" / family;
  config::from_json(config::parse_json_file(dir / "config.json"), config, "config.json");
  nn::CausalTransformer model(config);
  nn::load_parameters(*model, formats::SafetensorsFile(dir / "weights.safetensors"));
  return model;
}

inline nn::CausalTransformerConfig tiny_decoder_config() {
  nn::CausalTransformerConfig c;
  c.vocab_size = 64;
  c.emb_features = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.mlp_features = 48;
  c.max_seq_len = 32;
  return c;
}

// A token directory of pseudo-random ids in [0, 64) with some repetition to learn.
inline void write_tiny_tokens(const std::filesystem::path& dir, std::int64_t train_tokens = 2000, std::int64_t val_tokens = 300) {
  std::mt19937 rng(7);
  auto make = [&](std::int64_t n) {
    std::vector<data::TokenId> ids;
    for (std::int64_t i = 0; i < n; ++i) ids.push_back(i % 5 == 4 ? ids[ids.size() - 2] : static_cast<data::TokenId>(rng() % 64));
    return ids;
  };
  write_token_dir(dir, make(train_tokens), make(val_tokens), 64);
}

// Runs a scope with one intra-op thread. The tiny models here launch thousands of parallel regions of a
// few microseconds; on a loaded 2-core machine, OpenMP threads waiting at barriers for a descheduled peer
// made these tests 20-100x slower (90 s instead of 3 s). Results do not depend on it.
class SingleThreaded {
 public:
  SingleThreaded() : previous_(at::get_num_threads()) { at::set_num_threads(1); }
  ~SingleThreaded() { at::set_num_threads(previous_); }
  SingleThreaded(const SingleThreaded&) = delete;
  SingleThreaded& operator=(const SingleThreaded&) = delete;

 private:
  int previous_;
};

// Hands out the same rows every time (cycling through `text` when asked for fewer).
class RepeatingBatches final : public data::BatchSource {
 public:
  explicit RepeatingBatches(at::Tensor text) : text_(std::move(text)) {}
  data::Batch next_batch(std::int64_t rows) override {
    std::vector<at::Tensor> picked;
    for (std::int64_t r = 0; r < rows; ++r) picked.push_back(text_[(position_ + r) % text_.size(0)]);
    position_ += rows;
    data::Batch b;
    b.set("text", at::stack(picked));
    return b;
  }
  std::int64_t position() const override { return position_; }
  void set_position(std::int64_t p) override { position_ = p; }
  std::int64_t records() const override { return text_.size(0); }

 private:
  at::Tensor text_;
  std::int64_t position_ = 0;
};

}  // namespace dew::test
