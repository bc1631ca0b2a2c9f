#include "dew/runs/memory_estimate.h"

#include <c10/core/ScalarType.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "dew/core/error.h"
#include "dew/core/machine_memory.h"
#include "dew/nn/dtype.h"
#include "dew/nn/parameter_count.h"

namespace dew::runs {

namespace {

double element_bytes(const std::string& dtype) { return static_cast<double>(c10::elementSize(nn::parse_dtype(dtype))); }

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::optional<AvailableMemory> available(c10::Device device) {
  return device.is_cuda() ? available_cuda_memory(device.has_index() ? device.index() : 0) : available_host_memory();
}

std::string model_sizes(const nn::CausalTransformerConfig& m, double parameters) {
  char count[32];
  std::snprintf(count, sizeof count, "%.3g", parameters);
  return str("model.num_layers = ", m.num_layers, ", model.emb_features = ", m.emb_features, ", model.mlp_features = ",
             m.resolved_mlp_features(), ", model.num_heads = ", m.num_heads, ", model.vocab_size = ", m.vocab_size, " give ",
             count, " parameters");
}

}  // namespace

MemoryEstimate estimate_training_memory(const nn::CausalTransformerConfig& m, const training::TrainerConfig& trainer,
                                        std::int64_t seq_len, std::int64_t loss_chunk_tokens) {
  MemoryEstimate e;
  e.parameters = static_cast<double>(nn::parameter_count(m));
  const double param_bytes = element_bytes(m.param_dtype), compute_bytes = element_bytes(m.dtype);
  e.weights = e.parameters * param_bytes;
  e.gradients = e.weights;
  e.optimizer = 2 * e.weights;
  if (trainer.ema_decay > 0) e.ema = e.parameters * 4 + e.weights;
  const double rows = static_cast<double>(trainer.batch_size) / static_cast<double>(std::max<std::int64_t>(1, trainer.grad_accum));
  const double seq = static_cast<double>(seq_len), tokens = rows * seq;
  const double per_layer = tokens * (10.0 * static_cast<double>(m.emb_features) + 3.0 * static_cast<double>(m.resolved_mlp_features())) +
                           2.0 * rows * static_cast<double>(m.num_heads) * seq * seq;
  const double logit_tokens = loss_chunk_tokens > 0 ? std::min(tokens, static_cast<double>(loss_chunk_tokens)) : tokens;
  e.activations = static_cast<double>(m.num_layers) * per_layer * compute_bytes + 2.0 * logit_tokens * static_cast<double>(m.vocab_size) * 4.0;
  return e;
}

void check_training_memory(const nn::CausalTransformerConfig& model, const training::TrainerConfig& trainer,
                           std::int64_t seq_len, std::int64_t loss_chunk_tokens, c10::Device device) {
  const auto have = available(device);
  if (!have) return;  // nothing to compare with: the allocator will tell
  const MemoryEstimate e = estimate_training_memory(model, trainer, seq_len, loss_chunk_tokens);
  if (e.total() <= static_cast<double>(have->bytes)) return;
  fail("the run does not fit in memory: ", model_sizes(model, e.parameters), "; training needs about ", gib(e.total()),
       " (weights ", gib(e.weights), ", gradients ", gib(e.gradients), ", optimizer state ", gib(e.optimizer), ", EMA ",
       gib(e.ema), ", activations of one micro-batch ", gib(e.activations), ") but ", device.str(), " has ",
       gib(static_cast<double>(have->bytes)), " (", have->source, "); lower model.num_layers, model.emb_features or ",
       "model.mlp_features (all of it grows with them), or for the activations trainer.batch_size (or raise ",
       "trainer.grad_accum) and data.seq_len (nothing was written)");
}

void check_model_memory(const nn::CausalTransformerConfig& model, c10::Device device, const std::string& source) {
  const auto have = available(device);
  if (!have) return;
  const double parameters = static_cast<double>(nn::parameter_count(model));
  const double bytes = parameters * element_bytes(model.param_dtype);
  if (bytes <= static_cast<double>(have->bytes)) return;
  fail(source.empty() ? std::string() : "'" + source + "': ", "the model does not fit in memory: ", model_sizes(model, parameters), ", ", gib(bytes), " of ",
       model.param_dtype, " weights, but ", device.str(), " has ", gib(static_cast<double>(have->bytes)), " (", have->source,
       "); is the config damaged? (model.num_layers and model.emb_features set the size)");
}

}  // namespace dew::runs
