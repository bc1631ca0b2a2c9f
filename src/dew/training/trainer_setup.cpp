// Trainer: the parameters a fit() trains, placed on the device and wrapped for several processes (DDP
// buckets or FSDP shards), with their optimizer and EMA; the FLOP/s peak MFU divides by.
#include <ATen/ATen.h>

#include "dew/core/error.h"
#include "dew/nn/parameters.h"
#include "dew/training/flops.h"
#include "dew/training/trainer.h"

namespace dew::training {

std::int64_t Trainer::place_parameters(bool fresh) {
  auto& module = objective_.module();
  if (fresh) {
    if (init_on_fresh_run_) objective_.init(config_.seed);
    at::manual_seed(config_.seed);  // the stream objectives draw noise from on CPU
  }
  module.to(device_);
  module.train();
  params_.clear();
  for (const auto& [name, p] : nn::parameter_map(module)) {
    if (p.requires_grad()) params_[name] = p;
  }
  std::int64_t parameter_count = 0;  // counted whole, before any sharding
  for (const auto& [name, p] : params_) parameter_count += p.numel();
  sharded_.reset();
  buckets_.reset();
  if (group_) share_leader_weights();
  if (group_ && config_.parallel == "fsdp") {
    sharded_ = std::make_unique<ShardedTraining>(*group_, module);
    params_ = sharded_->shards();
  } else if (group_) {
    std::vector<at::Tensor> in_order;  // registration order, which the buckets reverse
    for (const auto& p : module.parameters()) {
      if (p.requires_grad()) in_order.push_back(p);
    }
    buckets_ = std::make_unique<distributed::GradientBuckets>(*group_, in_order);
  }
  optimizer_ = make_optimizer(optim_, params_);
  ema_ = std::make_unique<Ema>(config_.ema_decay, params_, config_.ema_warmup);
  return parameter_count;
}

double Trainer::peak_flops() {
  if (config_.peak_flops > 0) return config_.peak_flops;
  // With several processes the leader measures alone (a measurement on every rank at once would share
  // the cores and read low) and the others take its figure.
  double peak = leader() ? measure_peak_flops(device_, device_.is_cuda() ? at::kBFloat16 : at::kFloat) : 0;
  if (group_) peak = group_->all_reduce_sum({peak}, "the peak FLOP/s measurement")[0];
  return peak;
}

std::int64_t Trainer::resident_state_bytes() const {
  std::int64_t bytes = 0;
  auto add = [&](const std::map<std::string, at::Tensor>& tensors) {
    for (const auto& [name, t] : tensors) bytes += t.numel() * static_cast<std::int64_t>(t.element_size());
  };
  add(params_);
  if (optimizer_) add(optimizer_->state());
  if (ema_ && ema_->enabled()) add(ema_->state());
  return bytes;
}

void Trainer::share_leader_weights() {
  // Every rank starts from rank 0's weights and buffers, as PyTorch's DDP does at construction: a run that
  // initialises or loads differently on some rank (another seed, another file) cannot drift apart.
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> state;
  for (const auto& p : objective_.module().parameters()) state.push_back(p.detach());
  for (const auto& b : objective_.module().buffers()) state.push_back(b);
  std::vector<at::Tensor> copies;
  for (const auto& t : state) copies.push_back(t.contiguous());
  group_->broadcast(copies, 0, "the leader's initial weights");
  for (std::size_t i = 0; i < state.size(); ++i) {
    if (!copies[i].is_same(state[i])) state[i].copy_(copies[i]);
  }
}

}  // namespace dew::training
