#pragma once
// Parameters sharded over the processes, ZeRO-3 / FSDP style. Each parameter is cut along dim 0 into
// `world` equal blocks of rows (the last padded with zero rows); rank r keeps block r as a trainable leaf
// tensor of its own, its shard, and the optimizer, the EMA and gradient clipping see only the shards, so
// parameters, gradients, optimizer state and EMA all take about 1/world of the memory on each process.
// The module's own tensor holds nothing (0 elements) except while gathered for a call:
//
//   sharded.gather(layer, "layer 3");           // the module's tensors hold the full values again
//   ... forward / backward through them ...
//   sharded.reduce_gradients(layer, "layer 3");  // their gradients, summed over the ranks, into the shards
//   sharded.release(layer);                      // empty again
//
// Matrices shard into matrices (row blocks), so the optimizer's weight-decay rule (>= 2-D) holds for a
// shard as for its parameter. Padding rows start at zero and get zero gradients, so they stay zero.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Tensor.h>

#include "dew/distributed/process_group.h"

namespace dew::distributed {

class ShardedParameters {
 public:
  // Shards `params` (name -> the module's parameter tensor, with its current, identical on every rank,
  // values) and empties the module's tensors.
  ShardedParameters(ProcessGroup& group, std::vector<std::pair<std::string, at::Tensor>> params);

  std::size_t size() const { return entries_.size(); }
  const std::string& name(std::size_t i) const { return entries_[i].name; }
  // Name -> this rank's shard (a leaf tensor that requires grad).
  std::map<std::string, at::Tensor> shards() const;
  // Which entries hold these module tensors (by identity); tensors not sharded here are skipped.
  std::vector<std::size_t> indices_of(const std::vector<at::Tensor>& tensors) const;
  std::optional<std::size_t> index_of(const std::string& name) const;

  void gather(const std::vector<std::size_t>& which, const std::string& what);
  void reduce_gradients(const std::vector<std::size_t>& which, const std::string& what);
  void release(const std::vector<std::size_t>& which);

  // A tensor shaped like entry i's shard (the shard, an optimizer moment, an EMA copy) -> the whole
  // parameter-shaped tensor (a collective: every rank calls it, every rank gets it); for checkpoints.
  at::Tensor full(std::size_t i, const at::Tensor& shard_like, const std::string& what);
  // This rank's rows of a whole parameter-shaped tensor, shaped like its shard (zero padding included).
  at::Tensor rows_of(std::size_t i, const at::Tensor& whole) const;

  // Where the shards sit in the whole, for checkpoints that each process writes its part of: entry i's
  // full shape, and the rows [first, last) of it (a scalar is one row) that `rank` holds; past the end
  // (small tensors, many ranks) the range is empty.
  const std::vector<std::int64_t>& shape(std::size_t i) const { return entries_[i].shape; }
  std::pair<std::int64_t, std::int64_t> row_range(std::size_t i, std::int64_t rank) const;
  // A shard-shaped tensor without its zero padding: this rank's real rows (row_range's length).
  at::Tensor unpadded(std::size_t i, const at::Tensor& shard_like) const;
  // This rank's real rows (row_range's length) -> shard-shaped, zero padded.
  at::Tensor padded(std::size_t i, const at::Tensor& rows) const;

 private:
  struct Entry {
    std::string name;
    at::Tensor param;                  // the module's tensor
    std::vector<std::int64_t> shape;   // its full shape
    std::int64_t rows = 0, block = 0;  // rows of the full tensor (1 for a scalar), rows per rank
    at::Tensor shard;
  };
  at::Tensor padded_full_buffer(const Entry& e, const at::Tensor& like) const;
  // `which` grouped by the shards' dtype (one collective each).
  std::vector<std::vector<std::size_t>> by_dtype(const std::vector<std::size_t>& which) const;

  ProcessGroup& group_;
  std::vector<Entry> entries_;
};

}  // namespace dew::distributed
