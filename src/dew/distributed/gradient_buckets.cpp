#include "dew/distributed/gradient_buckets.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "dew/core/error.h"

namespace dew::distributed {
namespace {

struct ReadyHook : torch::autograd::PostAccumulateGradHook {
  ReadyHook(GradientBuckets* owner, std::size_t index) : owner(owner), index(index) {}
  void operator()(const torch::autograd::Variable&) override { owner->gradient_ready(index); }
  GradientBuckets* owner;
  std::size_t index;
};

}  // namespace

GradientBuckets::GradientBuckets(ProcessGroup& group, std::vector<at::Tensor> params, std::int64_t bucket_bytes)
    : group_(group), params_(std::move(params)), slot_(params_.size()), param_ready_(params_.size(), false) {
  if (bucket_bytes <= 0) fail("internal: gradient bucket size must be positive");
  // Reverse registration order: the output side's gradients are ready first. The first bucket is small
  // (1 MiB, as DDP's) so that communication starts early in backward.
  std::int64_t filled = 0;
  for (std::size_t k = params_.size(); k-- > 0;) {
    const auto& p = params_[k];
    const std::int64_t bytes = p.numel() * static_cast<std::int64_t>(p.element_size());
    const std::int64_t cap = buckets_.size() <= 1 ? std::min<std::int64_t>(bucket_bytes, 1 << 20) : bucket_bytes;
    const bool new_bucket = buckets_.empty() || filled + bytes > cap ||
                            params_[buckets_.back().members.front()].scalar_type() != p.scalar_type() ||
                            params_[buckets_.back().members.front()].device() != p.device();
    if (new_bucket) {
      buckets_.emplace_back();
      filled = 0;
    }
    slot_[k] = {buckets_.size() - 1, buckets_.back().members.size()};
    buckets_.back().members.push_back(k);
    filled += bytes;
  }
  for (auto& bucket : buckets_) {
    std::int64_t total = 0;
    for (auto k : bucket.members) total += params_[k].numel();
    const auto& first = params_[bucket.members.front()];
    bucket.buffer = at::zeros({total}, first.options().requires_grad(false));
    std::int64_t offset = 0;
    for (auto k : bucket.members) {
      bucket.views.push_back(bucket.buffer.narrow(0, offset, params_[k].numel()).view(params_[k].sizes()));
      offset += params_[k].numel();
    }
  }
  for (std::size_t k = 0; k < params_.size(); ++k) {
    torch::autograd::impl::set_post_acc_grad_hooks(params_[k], std::make_unique<ReadyHook>(this, k));
  }
}

GradientBuckets::~GradientBuckets() {
  for (auto& p : params_) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
}

void GradientBuckets::zero_gradients() {
  for (auto& bucket : buckets_) {
    bucket.buffer.zero_();
    bucket.ready = 0;
    bucket.started = false;
    bucket.pending.reset();
    for (std::size_t j = 0; j < bucket.members.size(); ++j) params_[bucket.members[j]].mutable_grad() = bucket.views[j];
  }
  std::fill(param_ready_.begin(), param_ready_.end(), false);
  next_launch_ = 0;
  armed_ = false;
}

void GradientBuckets::arm(std::string what) {
  armed_ = true;
  what_ = std::move(what);
}

void GradientBuckets::gradient_ready(std::size_t param_index) {
  if (!armed_ || param_ready_[param_index]) return;
  param_ready_[param_index] = true;
  auto& bucket = buckets_[slot_[param_index].first];
  if (++bucket.ready == bucket.members.size()) launch_ready_buckets();
}

void GradientBuckets::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].ready == buckets_[next_launch_].members.size()) {
    launch(buckets_[next_launch_++]);
  }
}

void GradientBuckets::launch(Bucket& bucket) {
  // Autograd replaces a gradient instead of adding into it in a few cases (a gradient of another layout or
  // dtype); such a gradient is copied back into the bucket so the sum covers it.
  for (std::size_t j = 0; j < bucket.members.size(); ++j) {
    auto& p = params_[bucket.members[j]];
    const auto& grad = p.grad();
    if (!grad.defined() || grad.data_ptr() != bucket.views[j].data_ptr()) {
      if (grad.defined()) bucket.views[j].copy_(grad);
      p.mutable_grad() = bucket.views[j];
    }
  }
  bucket.started = true;
  bucket.pending = std::make_unique<ProcessGroup::Pending>(group_.all_reduce_sum_async(bucket.buffer, what_));
}

void GradientBuckets::finish() {
  if (!armed_) fail("internal: GradientBuckets::finish without arm");
  while (next_launch_ < buckets_.size()) launch(buckets_[next_launch_++]);
  for (auto& bucket : buckets_) {
    bucket.pending->wait();
    bucket.pending.reset();
  }
  armed_ = false;
}

}  // namespace dew::distributed
