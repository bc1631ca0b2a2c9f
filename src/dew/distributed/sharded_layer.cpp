#include "dew/distributed/sharded_layer.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/custom_class.h>

namespace dew::distributed {
namespace {

// What backward needs besides the saved input, carried through the autograd context.
struct LayerCapsule : torch::CustomClassHolder {
  ShardedParameters* params = nullptr;
  std::vector<std::size_t> layer;
  std::string name;
  std::function<at::Tensor(const at::Tensor&)> call;
};

struct ShardedLayerFunction : torch::autograd::Function<ShardedLayerFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const c10::intrusive_ptr<LayerCapsule>& capsule) {
    capsule->params->gather(capsule->layer, capsule->name + "'s weights (forward)");
    at::Tensor out;
    {
      at::NoGradGuard no_grad;
      out = capsule->call(x);
    }
    capsule->params->release(capsule->layer);
    ctx->save_for_backward({x});
    ctx->saved_data["capsule"] = c10::IValue::make_capsule(capsule);
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto capsule = c10::static_intrusive_pointer_cast<LayerCapsule>(ctx->saved_data["capsule"].toCapsule());
    const at::Tensor x = ctx->get_saved_variables()[0];
    auto& params = *capsule->params;
    params.gather(capsule->layer, capsule->name + "'s weights (backward)");
    at::Tensor input = x.detach().requires_grad_(true);
    {
      at::AutoGradMode enable(true);
      at::Tensor out = capsule->call(input);
      torch::autograd::backward({out}, {grads[0]});
    }
    params.reduce_gradients(capsule->layer, capsule->name + "'s gradients");
    params.release(capsule->layer);
    return {input.grad(), at::Tensor()};
  }
};

}  // namespace

at::Tensor run_sharded_layer(ShardedParameters& params, std::vector<std::size_t> layer, std::string name,
                             const at::Tensor& x, std::function<at::Tensor(const at::Tensor&)> call) {
  auto capsule = c10::make_intrusive<LayerCapsule>();
  capsule->params = &params;
  capsule->layer = std::move(layer);
  capsule->name = std::move(name);
  capsule->call = std::move(call);
  return ShardedLayerFunction::apply(x, capsule);
}

}  // namespace dew::distributed
