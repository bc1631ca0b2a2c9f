#pragma once
// Will a model fit? Estimated from the config before anything is allocated, so that a mistyped size
// (model.emb_features=100000000, model.num_layers=1000000) is refused in milliseconds with the numbers,
// instead of dying in the allocator or building a million layers for minutes.
#include <c10/core/Device.h>

#include <string>

#include "dew/nn/causal_transformer_config.h"
#include "dew/training/trainer_config.h"

namespace dew::runs {

struct MemoryEstimate {
  double parameters = 0;  // count
  double weights = 0, gradients = 0, optimizer = 0, ema = 0, activations = 0;  // bytes
  double total() const { return weights + gradients + optimizer + ema + activations; }
};

// Training: parameters, their gradients and two AdamW moments in model.param_dtype, the EMA's float32
// copy and its swap buffer, and a rough activation bound for one micro-batch (per layer the saved
// projections and attention scores of trainer.batch_size / trainer.grad_accum rows of data.seq_len, plus
// the float32 logits and their gradient). Rough, meant to catch sizes off by orders of magnitude.
// `seq_len` is the longest row the kind's batches hold; `loss_chunk_tokens` bounds the logits held at once
// (0 = all of them).
MemoryEstimate estimate_training_memory(const nn::CausalTransformerConfig& model, const training::TrainerConfig& trainer,
                                        std::int64_t seq_len, std::int64_t loss_chunk_tokens);

// Refuses a training run whose estimate exceeds the memory of `device` (host: MemAvailable; CUDA: the
// device's free memory), naming the model fields, the estimate by part and what to lower.
void check_training_memory(const nn::CausalTransformerConfig& model, const training::TrainerConfig& trainer,
                           std::int64_t seq_len, std::int64_t loss_chunk_tokens, c10::Device device);
// Refuses a model whose parameters alone exceed that memory (loading for eval, generate, export).
// `source` names where the config came from (run.json), or is empty.
void check_model_memory(const nn::CausalTransformerConfig& model, c10::Device device, const std::string& source);

}  // namespace dew::runs
