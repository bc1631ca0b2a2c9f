#include "dew/nn/frozen_weights.h"

#include "dew/nn/layers.h"

namespace dew::nn {

std::int64_t store_frozen_weights_in_compute_dtype(CausalTransformer& model) {
  const auto compute = model->compute_dtype();
  const auto narrower = [&](const at::Tensor& t) {
    return t.defined() && !t.requires_grad() && t.is_floating_point() && t.scalar_type() != compute &&
           t.element_size() > c10::elementSize(compute);
  };
  std::int64_t freed = 0;
  at::NoGradGuard no_grad;
  for (const auto& module : model->modules(/*include_self=*/false)) {
    auto linear = std::dynamic_pointer_cast<LinearImpl>(module);
    if (!linear || linear->quantized) continue;
    for (at::Tensor* t : {&linear->weight, &linear->bias}) {
      if (!narrower(*t)) continue;
      freed += t->numel() * static_cast<std::int64_t>(t->element_size() - c10::elementSize(compute));
      // set_data, as Module::to does: the registered parameter and this handle are one tensor.
      t->set_data(t->to(compute));
    }
  }
  return freed;
}

}  // namespace dew::nn
