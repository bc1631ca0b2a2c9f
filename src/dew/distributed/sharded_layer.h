#pragma once
// One layer call with sharded parameters (sharded_parameters.h), as FSDP with activation checkpointing
// runs it: forward gathers the layer's parameters, calls the layer without recording a graph and empties
// them again, keeping only the layer's input; backward gathers them again, calls the layer once more, this
// time recording, backpropagates the output gradient through that call, adds the parameters' gradients
// (summed over the processes) to this rank's shards and empties them. So a process holds one layer's full
// weights at a time, and one layer's activations, at the price of a second forward per layer.
//
// `call` must compute the same thing both times (no random draws of its own) and keep alive whatever it
// reads besides `x` (it is called again during backward).
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <ATen/Tensor.h>

#include "dew/distributed/sharded_parameters.h"

namespace dew::distributed {

at::Tensor run_sharded_layer(ShardedParameters& params, std::vector<std::size_t> layer, std::string name,
                             const at::Tensor& x, std::function<at::Tensor(const at::Tensor&)> call);

}  // namespace dew::distributed
