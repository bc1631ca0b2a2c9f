#include "dew/objectives/token_cross_entropy.h"

#include <torch/csrc/autograd/custom_function.h>

#include <limits>

#include "dew/nn/cpu_matmul.h"
#include "dew/nn/weight_gradient.h"

namespace dew::objectives {
namespace {

at::Tensor logits_fp32(const at::Tensor& hidden, const at::Tensor& weight, double softcap) {
  auto z = nn::mm_transposed(hidden, weight.to(hidden.scalar_type())).to(at::kFloat);
  return softcap > 0 ? at::tanh(z / softcap) * softcap : z;
}

// z with column `excluded` at -inf (out of place, so autograd sees a plain function of z).
at::Tensor without(const at::Tensor& z, std::int64_t excluded) {
  if (excluded < 0) return z;
  return z.index_fill(1, at::full({1}, excluded, z.options().dtype(at::kLong)), -std::numeric_limits<float>::infinity());
}

// The fused log_softmax + nll kernels (forward and backward) are ~25% faster than logsumexp - gather
// through autograd's generic backwards on a [2048, 4096] block (bench/train_lm.sh profile).
CrossEntropySums sums_of(const at::Tensor& z, const at::Tensor& targets, const at::Tensor& weights, bool count_correct) {
  auto per_token = at::cross_entropy_loss(z, targets, /*weight=*/{}, at::Reduction::None);
  CrossEntropySums out{(per_token * weights).sum(), at::Tensor()};
  if (count_correct) {
    at::NoGradGuard no_grad;
    out.correct = ((z.argmax(-1) == targets) & (weights != 0)).to(at::kFloat).sum();
  }
  return out;
}

// The loss is a scalar, so its gradients are the incoming scalar times fixed tensors: the forward pass,
// which has each chunk's logits in hand anyway, computes them there (as Liger's fused linear cross
// entropy does), and the backward pass only scales them. Logits are computed once per step instead of
// twice (forward, then again in backward) and never held for the whole batch.
struct ChunkedCrossEntropy : public torch::autograd::Function<ChunkedCrossEntropy> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden,
                                                const at::Tensor& weight, const at::Tensor& targets,
                                                const at::Tensor& weights, double softcap, std::int64_t chunk,
                                                bool count_correct, std::int64_t excluded, bool grad_hidden_needed,
                                                bool grad_weight_needed) {
    auto N = hidden.size(0);
    auto loss = at::zeros({}, hidden.options().dtype(at::kFloat));
    auto correct = at::zeros({}, hidden.options().dtype(at::kFloat));
    at::Tensor grad_hidden = grad_hidden_needed ? at::empty_like(hidden) : at::Tensor();
    at::Tensor grad_weight = grad_weight_needed ? at::zeros(weight.sizes(), weight.options().dtype(at::kFloat)) : at::Tensor();
    const auto w_compute = weight.to(hidden.scalar_type());
    for (std::int64_t start = 0; start < N; start += chunk) {
      auto n = std::min(chunk, N - start);
      auto h = hidden.narrow(0, start, n);
      auto t = targets.narrow(0, start, n).unsqueeze(1);
      auto w = weights.narrow(0, start, n);
      auto z = logits_fp32(h, weight, softcap);
      auto kept = without(z, excluded);
      if (count_correct) correct += ((kept.argmax(-1) == t.squeeze(1)) & (w != 0)).to(at::kFloat).sum();
      // Without a softcap nothing needs the logits after this (the softcap's derivative needs z), so log-softmax
      // overwrites them (the kernel reads each row before writing it): one [chunk, vocab] float32 block held
      // per chunk instead of two. Both are fresh float32 tensors of this chunk (logits_fp32, without).
      auto logp = softcap > 0 ? at::log_softmax(kept, -1) : at::_log_softmax_out(kept, kept, -1, /*half_to_float=*/false);
      loss -= (logp.gather(1, t).squeeze(1) * w).sum();
      if (!grad_hidden_needed && !grad_weight_needed) continue;
      // d(lse - z_t)/dz = softmax(z) - onehot(t), times each token's weight (softmax reuses logp's memory).
      auto dz = logp.exp_();
      dz.scatter_add_(1, t, at::full({n, 1}, -1.0, dz.options()));
      dz.mul_(w.unsqueeze(1));
      if (softcap > 0) dz.mul_(1 - (z / softcap).pow(2));  // through cap * tanh(x / cap); z is finite here
      if (grad_hidden_needed) grad_hidden.narrow(0, start, n).copy_(nn::mm_transposed(dz.to(h.scalar_type()), w_compute.t()));
      if (grad_weight_needed) nn::add_weight_gradient(grad_weight, dz, h.to(at::kFloat));
    }
    ctx->save_for_backward({grad_hidden, grad_weight});
    ctx->saved_data["weight_dtype"] = weight.scalar_type();
    ctx->mark_non_differentiable({correct});
    return {loss, correct};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    const auto& g = grad_outputs[0];
    at::Tensor grad_hidden = saved[0].defined() ? saved[0] * g.to(saved[0].scalar_type()) : at::Tensor();
    at::Tensor grad_weight = saved[1].defined() ? (saved[1] * g).to(ctx->saved_data["weight_dtype"].toScalarType())
                                                : at::Tensor();
    return {grad_hidden, grad_weight, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

CrossEntropySums token_cross_entropy(const at::Tensor& hidden, const at::Tensor& output_weight,
                                     const at::Tensor& targets, const at::Tensor& weights, double softcap,
                                     std::int64_t chunk_tokens, bool count_correct, std::int64_t excluded_id) {
  if (chunk_tokens <= 0 || chunk_tokens >= hidden.size(0)) {
    return sums_of(without(logits_fp32(hidden, output_weight, softcap), excluded_id), targets, weights, count_correct);
  }
  // Inside forward() grad mode is off, so whether the gradients will be wanted is decided here.
  const bool grad = at::GradMode::is_enabled();
  auto out = ChunkedCrossEntropy::apply(hidden, output_weight, targets, weights, softcap, chunk_tokens, count_correct,
                                        excluded_id, grad && hidden.requires_grad(), grad && output_weight.requires_grad());
  return {out[0], count_correct ? out[1] : at::Tensor()};
}

}  // namespace dew::objectives
