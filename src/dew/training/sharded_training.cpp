#include "dew/training/sharded_training.h"

#include <ATen/ATen.h>

#include <set>

#include "dew/core/error.h"
#include "dew/distributed/sharded_layer.h"
#include "dew/nn/layer_stack.h"

namespace dew::training {

ShardedTraining::ShardedTraining(distributed::ProcessGroup& group, torch::nn::Module& module)
    : group_(group), module_(module) {
  auto* stack = dynamic_cast<nn::LayerStack*>(&module);
  if (!stack) {
    fail("trainer.parallel = fsdp shards a model layer by layer, and this model (", module.name(),
         ") has no layer stack; use trainer.parallel = ddp");
  }
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const auto& item : module.named_parameters()) {
    if (!item.value().requires_grad()) {
      fail("trainer.parallel = fsdp shards models whose every weight trains, but '", item.key(),
           "' is frozen (LoRA adapters train a small part: use trainer.parallel = ddp)");
    }
    named.emplace_back(item.key(), item.value());
  }
  const auto layers = stack->stacked_layers();
  std::vector<std::vector<at::Tensor>> layer_tensors;
  for (const auto& layer : layers) layer_tensors.push_back(layer->parameters());
  sharded_ = std::make_unique<distributed::ShardedParameters>(group, std::move(named));
  std::set<std::size_t> in_layers;
  for (const auto& tensors : layer_tensors) {
    layers_.push_back(sharded_->indices_of(tensors));
    in_layers.insert(layers_.back().begin(), layers_.back().end());
  }
  for (std::size_t i = 0; i < sharded_->size(); ++i) {
    if (!in_layers.count(i)) root_.push_back(i);
  }
  stack->set_layer_runner([this](std::int64_t layer, const at::Tensor& x, const nn::LayerCall& call) {
    return distributed::run_sharded_layer(*sharded_, layers_[static_cast<std::size_t>(layer)], str("layer ", layer), x, call);
  });
}

ShardedTraining::~ShardedTraining() {
  if (auto* stack = dynamic_cast<nn::LayerStack*>(&module_)) stack->set_layer_runner(nullptr);
  try {
    std::vector<std::size_t> all(sharded_->size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    sharded_->gather(all, "the whole model at the end of training");
  } catch (...) {
    // A failed job: its processes are exiting, and the module is not used again.
  }
}

std::optional<std::size_t> ShardedTraining::entry_of(const std::string& key) const {
  if (auto i = sharded_->index_of(key)) return i;
  const auto slash = key.find('/');
  if (slash == std::string::npos) return std::nullopt;
  return sharded_->index_of(key.substr(slash + 1));
}

std::map<std::string, ShardRows> ShardedTraining::checkpoint_rows(const std::map<std::string, at::Tensor>& shard_state) const {
  std::map<std::string, ShardRows> out;
  for (const auto& [key, t] : shard_state) {
    ShardRows& s = out[key];
    const auto i = entry_of(key);
    const at::Tensor local = t.detach().to(at::kCPU);
    if (i) {
      s.rows = sharded_->unpadded(*i, local);
      s.layout.shape = sharded_->shape(*i);
      for (std::int64_t r = 0; r < group_.world(); ++r) s.layout.ranges.push_back(sharded_->row_range(*i, r));
    } else {  // the same on every rank (the optimizer's step): rank 0 writes all of its rows
      const at::Tensor rows = local.dim() == 0 ? local.reshape({1}) : local;
      s.layout.shape = local.sizes().vec();
      for (std::int64_t r = 0; r < group_.world(); ++r) {
        s.layout.ranges.emplace_back(r == 0 ? 0 : rows.size(0), rows.size(0));
      }
      if (group_.rank() == 0) s.rows = rows;
    }
  }
  return out;
}

std::map<std::string, at::Tensor> ShardedTraining::rows(const CheckpointPart& part) const {
  std::map<std::string, at::Tensor> out;
  for (const auto& key : part.names()) {
    const auto i = entry_of(key);
    if (!i) {
      out[key] = part.whole(key);
      continue;
    }
    const auto shape = part.shape(key);
    if (shape != sharded_->shape(*i)) {
      fail("'", part.source(), "' tensor '", key, "' has shape ", c10::IntArrayRef(shape), " but the model's is ",
           c10::IntArrayRef(sharded_->shape(*i)), "; resume with the configuration the run was trained with");
    }
    const auto [first, last] = sharded_->row_range(*i, group_.rank());
    out[key] = sharded_->padded(*i, part.rows(key, first, last));
  }
  return out;
}

double ShardedTraining::sum_over_processes(double local_sum_of_squares) {
  return group_.all_reduce_sum({local_sum_of_squares}, "the gradient norm")[0];
}

}  // namespace dew::training
