#include "dew/distributed/sharded_parameters.h"

#include <ATen/ATen.h>

#include <algorithm>

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
  const auto [first, last] = row_range(i, group_.rank());
  std::vector<std::int64_t> shape = rows.sizes().vec();
  shape[0] = e.block;
  at::Tensor out = at::zeros(shape, rows.options());
  if (last > first) out.narrow(0, 0, last - first).copy_(rows.narrow(0, first, last - first));
  return out;
}

std::pair<std::int64_t, std::int64_t> ShardedParameters::row_range(std::size_t i, std::int64_t rank) const {
  const Entry& e = entries_[i];
  const std::int64_t first = std::min(e.rows, rank * e.block);
  return {first, std::min(e.rows, first + e.block)};
}

at::Tensor ShardedParameters::unpadded(std::size_t i, const at::Tensor& shard_like) const {
  const auto [first, last] = row_range(i, group_.rank());
  return shard_like.narrow(0, 0, last - first);
}

at::Tensor ShardedParameters::padded(std::size_t i, const at::Tensor& rows) const {
  const Entry& e = entries_[i];
  const auto [first, last] = row_range(i, group_.rank());
  if (rows.dim() == 0 || rows.size(0) != last - first) {
    dew::fail("'", e.name, "': ", rows.dim() == 0 ? 0 : rows.size(0), " rows for a shard that holds ", last - first);
  }
  std::vector<std::int64_t> shape = rows.sizes().vec();
  shape[0] = e.block;
  at::Tensor out = at::zeros(shape, rows.options());
  if (last > first) out.narrow(0, 0, last - first).copy_(rows);
  return out;
}

at::Tensor ShardedParameters::full(std::size_t i, const at::Tensor& shard_like, const std::string& what) {
  const Entry& e = entries_[i];
  at::NoGradGuard no_grad;
  at::Tensor buffer = padded_full_buffer(e, shard_like);
  group_.all_gather(buffer, shard_like.detach(), what);
  return buffer.narrow(0, 0, e.rows).reshape(e.shape);
}

std::vector<std::vector<std::size_t>> ShardedParameters::by_dtype(const std::vector<std::size_t>& which) const {
  std::vector<std::vector<std::size_t>> groups;
  for (auto i : which) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const std::vector<std::size_t>& g) {
      return entries_[g.front()].shard.scalar_type() == entries_[i].shard.scalar_type();
    });
    if (it == groups.end()) {
      groups.push_back({i});
    } else {
      it->push_back(i);
    }
  }
  return groups;
}

// One collective per dtype for all of `which`: every rank's shards side by side in one flat row, the
// ranks' rows gathered into [world, F], then each parameter's blocks taken in rank order. One call of a
// layer is one gather, not one per weight: collectives cost a fixed latency each.
void ShardedParameters::gather(const std::vector<std::size_t>& which, const std::string& what) {
  at::NoGradGuard no_grad;
  const std::int64_t world = group_.world();
  for (const auto& members : by_dtype(which)) {
    std::vector<at::Tensor> flat;
    for (auto i : members) flat.push_back(entries_[i].shard.detach().reshape({-1}));
    at::Tensor mine = at::cat(flat);
    const std::int64_t F = mine.numel();
    at::Tensor all = at::empty({world * F}, mine.options());
    group_.all_gather(all, mine, what);
    const at::Tensor rows = all.view({world, F});
    std::int64_t offset = 0;
    for (auto i : members) {
      Entry& e = entries_[i];
      const std::int64_t n = e.shard.numel();
      std::vector<std::int64_t> padded_shape = as_rows(e.shard).sizes().vec();
      padded_shape[0] = e.block * world;
      at::Tensor padded = rows.narrow(1, offset, n).reshape(padded_shape);  // rank 0's block, rank 1's, ...
      e.param.set_data(padded.narrow(0, 0, e.rows).view(e.shape));
      offset += n;
    }
  }
}

// The gradients of `which` laid out as [world, F] (row r: every parameter's block r, side by side), one
// reduce-scatter per dtype, and each rank's row of the sum added to its shards.
void ShardedParameters::reduce_gradients(const std::vector<std::size_t>& which, const std::string& what) {
  at::NoGradGuard no_grad;
  const std::int64_t world = group_.world();
  std::vector<std::size_t> with_grad;
  for (auto i : which) {
    if (entries_[i].param.grad().defined()) with_grad.push_back(i);  // unused in this call: nothing on any rank
  }
  for (const auto& members : by_dtype(with_grad)) {
    std::int64_t F = 0;
    for (auto i : members) F += entries_[i].shard.numel();
    at::Tensor input = at::empty({world, F}, entries_[members.front()].shard.options().requires_grad(false));
    std::int64_t offset = 0;
    for (auto i : members) {
      Entry& e = entries_[i];
      const std::int64_t n = e.shard.numel();
      at::Tensor padded = padded_full_buffer(e, e.shard).zero_();
      padded.narrow(0, 0, e.rows).copy_(as_rows(e.param.grad()));
      input.narrow(1, offset, n).copy_(padded.view({world, n}));
      offset += n;
    }
    at::Tensor mine = at::empty({F}, input.options());
    group_.reduce_scatter_sum(mine, input.view({-1}), what);
    offset = 0;
    for (auto i : members) {
      Entry& e = entries_[i];
      const std::int64_t n = e.shard.numel();
      at::Tensor part = mine.narrow(0, offset, n).view(e.shard.sizes());
      if (e.shard.grad().defined()) {
        e.shard.mutable_grad().add_(part);
      } else {
        e.shard.mutable_grad() = part.clone();
      }
      e.param.mutable_grad() = at::Tensor();
      offset += n;
    }
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
