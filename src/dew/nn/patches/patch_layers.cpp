#include "dew/nn/patches/patch_layers.h"

#include <cmath>

#include "dew/nn/activations.h"
#include "dew/nn/cpu_matmul.h"
#include "dew/nn/short_attention.h"

namespace dew::nn {
namespace {
constexpr auto kParamDtype = at::kFloat;
}  // namespace

at::Tensor sincos_positions_2d(std::int64_t dim, std::int64_t grid) {
  const std::int64_t quarter = dim / 4;
  auto doubles = at::TensorOptions().dtype(at::kDouble);
  auto omega = at::pow(10000.0, at::arange(quarter, doubles) / -static_cast<double>(quarter));  // [dim/4]
  auto axis = [&](const at::Tensor& coordinate) {  // [N] -> [N, dim/2]: sines then cosines
    auto angles = coordinate.unsqueeze(1) * omega.unsqueeze(0);
    return at::cat({at::sin(angles), at::cos(angles)}, 1);
  };
  auto index = at::arange(grid * grid, doubles);
  auto row = at::floor(index / static_cast<double>(grid)), column = index - row * static_cast<double>(grid);
  // DiT builds its grid with numpy's meshgrid(w, h): the first half encodes the column, the second the row.
  return at::cat({axis(column), axis(row)}, 1).to(at::kFloat);
}

PatchEmbedImpl::PatchEmbedImpl(std::int64_t channels, std::int64_t dim, std::int64_t patch) {
  proj = register_module("proj", Conv2d(channels, dim, patch, patch, 0));
}

at::Tensor PatchEmbedImpl::forward(const at::Tensor& x) const { return proj->forward(x).flatten(2).transpose(1, 2); }

PatchAttentionImpl::PatchAttentionImpl(std::int64_t dim, std::int64_t heads_) : heads(heads_) {
  qkv = register_module("qkv", Linear(dim, 3 * dim, true, kParamDtype));
  proj = register_module("proj", Linear(dim, dim, true, kParamDtype));
}

at::Tensor PatchAttentionImpl::forward(const at::Tensor& x, const at::Tensor& residual) const {
  const auto B = x.size(0), N = x.size(1), D = x.size(2);
  const auto projected = qkv->forward(x);
  if (short_attention_packed_applies(projected, heads)) {  // float32 CPU patch sequences
    return proj->forward_plus(short_attention_packed(projected, heads, /*causal=*/false, 1.0 / std::sqrt(static_cast<double>(D / heads))),
                              residual);
  }
  // unbind, not qkv_heads[i]: three selects would each backpropagate into a zero-filled copy of the whole
  // [3, B, H, N, hd] gradient; unbind's backward is one stack.
  const auto q_k_v = projected.reshape({B, N, 3, heads, D / heads}).permute({2, 0, 3, 1, 4}).unbind(0);  // [B, H, N, hd] each
  auto out = attention_short_or_sdpa(q_k_v[0], q_k_v[1], q_k_v[2], /*causal=*/false);
  return proj->forward_plus(out.transpose(1, 2).reshape({B, N, D}), residual);
}

PatchMlpImpl::PatchMlpImpl(std::int64_t dim, std::int64_t hidden) {
  fc1 = register_module("fc1", Linear(dim, hidden, true, kParamDtype));
  fc2 = register_module("fc2", Linear(hidden, dim, true, kParamDtype));
}

at::Tensor PatchMlpImpl::forward(const at::Tensor& x, const at::Tensor& residual) const {
  if (!fc1->quantized && !fc1->lora_A) {  // without gradients (a JEPA target, sampling) the GELU rides on the product
    if (auto fused = cpu_linear_gelu_tanh_no_grad(x, fc1->weight, fc1->bias); fused.defined()) return fc2->forward_plus(fused, residual);
  }
  return fc2->forward_plus(dew::nn::gelu_tanh(fc1->forward(x)), residual);
}

}  // namespace dew::nn
