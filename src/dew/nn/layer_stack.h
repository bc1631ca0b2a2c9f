#pragma once
// A model whose forward runs a stack of layers one after another, each on the previous one's output, can
// hand every layer call to a runner. Sharded training (distributed/sharded_layer.h) uses it to gather a
// layer's weights only for the time of its call, and to recompute the call in backward.
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace dew::nn {

// One layer's call on its input; holds (copies of) everything else the call reads, so it can run again
// later (in backward).
using LayerCall = std::function<at::Tensor(const at::Tensor& x)>;
// Runs `call` for layer `layer` on `x`; the default is call(x).
using LayerRunner = std::function<at::Tensor(std::int64_t layer, const at::Tensor& x, const LayerCall& call)>;

class LayerStack {
 public:
  virtual ~LayerStack() = default;
  // The layers, in call order; the parameters of the model not in any of them are its root.
  virtual std::vector<std::shared_ptr<torch::nn::Module>> stacked_layers() = 0;
  // nullptr restores direct calls.
  virtual void set_layer_runner(LayerRunner runner) = 0;
};

}  // namespace dew::nn
