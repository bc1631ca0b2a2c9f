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

std::map<std::string, at::Tensor> ShardedTraining::whole(const std::map<std::string, at::Tensor>& shard_state,
                                                         const std::string& what) {
  // One tensor at a time; only rank 0, which writes the file, keeps them: the others' memory grows by one
  // tensor at most.
  const bool keep = group_.rank() == 0;
  std::map<std::string, at::Tensor> out;
  for (const auto& [key, t] : shard_state) {
    const auto i = entry_of(key);
    at::Tensor whole = i ? sharded_->full(*i, t, what) : t;
    if (keep) out[key] = whole;
  }
  return out;
}

std::map<std::string, at::Tensor> ShardedTraining::rows(const std::map<std::string, at::Tensor>& whole_state) const {
  std::map<std::string, at::Tensor> out;
  for (const auto& [key, t] : whole_state) {
    const auto i = entry_of(key);
    out[key] = i ? sharded_->rows_of(*i, t) : t;
  }
  return out;
}

double ShardedTraining::sum_over_processes(double local_sum_of_squares) {
  return group_.all_reduce_sum({local_sum_of_squares}, "the gradient norm")[0];
}

}  // namespace dew::training
