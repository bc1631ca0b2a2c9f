#include "dew/distributed/sharded_parameters.h"

#include <ATen/ATen.h>

#include "dew/core/error.h"

namespace dew::distributed {
namespace {

// A scalar shards as one row.
at::Tensor as_rows(const at::Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

}  // namespace

ShardedParameters::ShardedParameters(ProcessGroup& group, std::vector<std::pair<std::string, at::Tensor>> params)
    : group_(group) {
  at::NoGradGuard no_grad;
  for (auto& [name, param] : params) {
    Entry e;
    e.name = name;
    e.param = param;
    e.shape = param.sizes().vec();
    e.rows = as_rows(param).size(0);
    e.block = (e.rows + group.world() - 1) / group.world();
    entries_.push_back(std::move(e));
    Entry& added = entries_.back();
    added.shard = rows_of(entries_.size() - 1, param.detach()).clone().requires_grad_(true);
    param.set_data(at::empty({0}, param.options()));
    param.mutable_grad() = at::Tensor();
  }
}

std::map<std::string, at::Tensor> ShardedParameters::shards() const {
  std::map<std::string, at::Tensor> out;
  for (const auto& e : entries_) out[e.name] = e.shard;
  return out;
}

std::vector<std::size_t> ShardedParameters::indices_of(const std::vector<at::Tensor>& tensors) const {
  std::vector<std::size_t> out;
  for (const auto& t : tensors) {
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].param.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) out.push_back(i);
    }
  }
  return out;
}

std::optional<std::size_t> ShardedParameters::index_of(const std::string& name) const {
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].name == name) return i;
  }
  return std::nullopt;
}

at::Tensor ShardedParameters::padded_full_buffer(const Entry& e, const at::Tensor& like) const {
  std::vector<std::int64_t> shape = as_rows(like).sizes().vec();
  shape[0] = e.block * group_.world();
  return at::empty(shape, like.options());
}

at::Tensor ShardedParameters::rows_of(std::size_t i, const at::Tensor& whole) const {
  const Entry& e = entries_[i];
  const at::Tensor rows = as_rows(whole);
  const std::int64_t first = std::min(e.rows, group_.rank() * e.block), last = std::min(e.rows, first + e.block);
  std::vector<std::int64_t> shape = rows.sizes().vec();
  shape[0] = e.block;
  at::Tensor out = at::zeros(shape, rows.options());
  if (last > first) out.narrow(0, 0, last - first).copy_(rows.narrow(0, first, last - first));
  return out;
}

at::Tensor ShardedParameters::full(std::size_t i, const at::Tensor& shard_like, const std::string& what) {
  const Entry& e = entries_[i];
  at::NoGradGuard no_grad;
  at::Tensor buffer = padded_full_buffer(e, shard_like);
  group_.all_gather(buffer, shard_like.detach(), what);
  return buffer.narrow(0, 0, e.rows).reshape(e.shape);
}

void ShardedParameters::gather(const std::vector<std::size_t>& which, const std::string& what) {
  at::NoGradGuard no_grad;
  for (auto i : which) {
    Entry& e = entries_[i];
    at::Tensor buffer = padded_full_buffer(e, e.shard);
    group_.all_gather(buffer, e.shard.detach(), what);
    e.param.set_data(buffer.narrow(0, 0, e.rows).view(e.shape));
  }
}

void ShardedParameters::reduce_gradients(const std::vector<std::size_t>& which, const std::string& what) {
  at::NoGradGuard no_grad;
  for (auto i : which) {
    Entry& e = entries_[i];
    const at::Tensor& grad = e.param.grad();
    if (!grad.defined()) continue;  // not used in this call: nothing to add on any rank
    at::Tensor padded = padded_full_buffer(e, e.shard).zero_();
    padded.narrow(0, 0, e.rows).copy_(as_rows(grad));
    at::Tensor mine = at::empty_like(e.shard);
    group_.reduce_scatter_sum(mine, padded, what);
    if (e.shard.grad().defined()) {
      e.shard.mutable_grad().add_(mine);
    } else {
      e.shard.mutable_grad() = mine;
    }
    e.param.mutable_grad() = at::Tensor();
  }
}

void ShardedParameters::release(const std::vector<std::size_t>& which) {
  for (auto i : which) {
    Entry& e = entries_[i];
    e.param.set_data(at::empty({0}, e.shard.options().requires_grad(false)));
    e.param.mutable_grad() = at::Tensor();
  }
}

}  // namespace dew::distributed
