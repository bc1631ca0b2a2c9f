#include "dew/objectives/token_logprobs.h"

#include <cmath>

#include <torch/csrc/autograd/custom_function.h>

#include "dew/core/error.h"
#include "dew/nn/cpu_matmul.h"
#include "dew/nn/weight_gradient.h"

namespace dew::objectives {
namespace {

// Soft-capped logits in fp32, before the temperature (the backward needs them to undo the cap).
at::Tensor capped_logits(const at::Tensor& hidden, const at::Tensor& weight, double softcap) {
  auto z = nn::mm_transposed(hidden, weight.to(hidden.scalar_type())).to(at::kFloat);
  return softcap > 0 ? at::tanh(z / softcap) * softcap : z;
}

// -cross_entropy is log_softmax gathered at the target; the fused kernel (forward and backward) is the
// fastest way there, as token_cross_entropy measured.
at::Tensor logprobs_of(const at::Tensor& z, const at::Tensor& targets) {
  return -at::cross_entropy_loss(z, targets, /*weight=*/{}, at::Reduction::None);
}

// Each token's log-probability depends only on its own row of hidden, so the gradient with respect to
// that row is the incoming per-token gradient times a fixed row, (onehot - softmax) W / temperature. When
// the output projection is frozen (LoRA, or a reference pass), the forward pass, which has the chunk's
// logits in hand, computes those rows and backward only scales them: logits once per step, not twice.
// A trainable projection's gradient mixes rows by the incoming gradient, so that case keeps the logits'
// recomputation in backward.
struct ChunkedTargetLogprobs : public torch::autograd::Function<ChunkedTargetLogprobs> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden, const at::Tensor& weight,
                            const at::Tensor& targets, double softcap, double temperature, std::int64_t chunk,
                            bool grad_hidden_needed, bool grad_weight_needed) {
    auto N = hidden.size(0);
    auto out = at::empty({N}, hidden.options().dtype(at::kFloat));
    const bool rows_now = grad_hidden_needed && !grad_weight_needed;
    at::Tensor grad_rows = rows_now ? at::empty_like(hidden) : at::Tensor();
    const auto w_compute = weight.to(hidden.scalar_type());
    for (std::int64_t start = 0; start < N; start += chunk) {
      auto n = std::min(chunk, N - start);
      auto h = hidden.narrow(0, start, n);
      auto t = targets.narrow(0, start, n).unsqueeze(1);
      // One [n, vocab] block, worked in place (logits -> z - lse -> -softmax -> the gradient rows' factor):
      // it is the largest thing alive at this point, on top of the decoder's saved activations.
      auto z = capped_logits(h, weight, softcap);  // a fresh tensor, so in-place is safe
      at::Tensor through_cap;                      // d(cap * tanh(x / cap))/dx = 1 - (capped / cap)^2
      if (rows_now && softcap > 0) through_cap = 1 - (z / softcap).pow(2);
      if (temperature != 1.0) z.div_(temperature);
      auto lse = at::logsumexp(z, -1, /*keepdim=*/true);
      out.narrow(0, start, n).copy_((z.gather(1, t) - lse).squeeze(1));
      if (!rows_now) continue;
      auto dz = z.sub_(lse).exp_().neg_();  // onehot(t) - softmax(z), then through the temperature and the cap
      dz.scatter_add_(1, t, at::ones({n, 1}, dz.options()));
      if (temperature != 1.0) dz.div_(temperature);
      if (softcap > 0) dz.mul_(through_cap);
      grad_rows.narrow(0, start, n).copy_(nn::mm_transposed(dz.to(h.scalar_type()), w_compute.t()));
    }
    if (rows_now) {
      ctx->save_for_backward({grad_rows});
    } else {
      ctx->save_for_backward({hidden, weight, targets});
    }
    ctx->saved_data["rows_now"] = rows_now;
    ctx->saved_data["softcap"] = softcap;
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["chunk"] = chunk;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    auto g = grad_outputs[0].to(at::kFloat);
    const at::Tensor none;
    if (ctx->saved_data["rows_now"].toBool()) {
      const auto& rows = saved[0];
      return {rows * g.unsqueeze(1).to(rows.scalar_type()), none, none, none, none, none, none, none};
    }
    const auto &hidden = saved[0], &weight = saved[1], &targets = saved[2];
    double softcap = ctx->saved_data["softcap"].toDouble();
    double temperature = ctx->saved_data["temperature"].toDouble();
    std::int64_t chunk = ctx->saved_data["chunk"].toInt();
    auto N = hidden.size(0);
    auto grad_hidden = at::empty_like(hidden);
    auto grad_weight = at::zeros(weight.sizes(), weight.options().dtype(at::kFloat));
    auto w_compute = weight.to(hidden.scalar_type());
    for (std::int64_t start = 0; start < N; start += chunk) {
      auto n = std::min(chunk, N - start);
      auto h = hidden.narrow(0, start, n);
      auto capped = capped_logits(h, weight, softcap);
      // d(z_t - lse(z))/dz = onehot(t) - softmax(z) with z = capped / temperature; times the incoming grad,
      // then through the division by temperature and the cap.
      auto dz = at::softmax(capped / temperature, -1).neg_();
      dz.scatter_add_(1, targets.narrow(0, start, n).unsqueeze(1), at::ones({n, 1}, dz.options()));
      dz.mul_((g.narrow(0, start, n) / temperature).unsqueeze(1));
      if (softcap > 0) dz.mul_(1 - (capped / softcap).pow(2));  // through cap * tanh(x / cap)
      grad_hidden.narrow(0, start, n).copy_(nn::mm_transposed(dz.to(h.scalar_type()), w_compute.t()));
      nn::add_weight_gradient(grad_weight, dz, h.to(at::kFloat));
    }
    return {grad_hidden, grad_weight.to(weight.scalar_type()), none, none, none, none, none, none};
  }
};

}  // namespace

at::Tensor target_logprobs(const at::Tensor& hidden, const at::Tensor& output_weight, const at::Tensor& targets,
                           double softcap, double temperature, std::int64_t chunk_tokens) {
  if (!(temperature > 0) || !std::isfinite(temperature)) {
    dew::fail("log-probabilities need a finite positive temperature, got ", temperature);
  }
  // The chunked function also serves when one chunk holds every token: with a frozen projection it keeps
  // the [N, E] gradient rows for backward instead of autograd's [N, vocab] log-softmax (DPO's 8 rows of
  // ~53 tokens: 83 MB a copy for SmolLM2's 49,152-word vocabulary), and without gradients (reference
  // passes) it frees the logits before returning.
  if (chunk_tokens <= 0) {
    auto z = capped_logits(hidden, output_weight, softcap);
    return logprobs_of(temperature == 1.0 ? z : z / temperature, targets);
  }
  // Inside forward() grad mode is off, so whether the gradients will be wanted is decided here.
  const bool grad = at::GradMode::is_enabled();
  return ChunkedTargetLogprobs::apply(hidden, output_weight, targets, softcap, temperature, chunk_tokens,
                                      grad && hidden.requires_grad(), grad && output_weight.requires_grad());
}

at::Tensor token_logprobs(nn::CausalTransformer& model, const at::Tensor& ids, const at::Tensor& positions,
                          const at::Tensor& segment_ids, std::int64_t chunk_tokens, double temperature) {
  if (ids.dim() != 2 || ids.size(1) < 2) {
    dew::fail("token log-probabilities need ids of shape [batch, tokens] with at least 2 tokens, got ", ids.sizes());
  }
  auto vocab = model->config().vocab_size;
  {
    auto range = at::aminmax(ids);
    auto lo = std::get<0>(range).item<std::int64_t>(), hi = std::get<1>(range).item<std::int64_t>();
    if (lo < 0 || hi >= vocab) {
      dew::fail("token id ", lo < 0 ? lo : hi, " is outside the model's vocabulary [0, ", vocab,
                "); the text was tokenized with a different tokenizer than the model expects");
    }
  }
  auto B = ids.size(0), S = ids.size(1) - 1;
  nn::DecoderInputs in{ids.narrow(1, 0, S)};
  if (positions.defined()) in.positions = positions.narrow(1, 0, S);
  if (segment_ids.defined()) in.segment_ids = segment_ids.narrow(1, 0, S);
  auto hidden = model->hidden_states(in);
  auto logp = target_logprobs(hidden.reshape({B * S, hidden.size(-1)}), model->output_weight(),
                              ids.narrow(1, 1, S).reshape(-1), model->config().final_logit_softcap, temperature,
                              chunk_tokens);
  return logp.reshape({B, S});
}

at::Tensor sequence_logprobs(const at::Tensor& token_logprobs, const at::Tensor& mask) {
  if (token_logprobs.sizes() != mask.sizes()) {
    dew::fail("sequence log-probabilities: the mask's shape ", mask.sizes(), " differs from the log-probabilities' ",
              token_logprobs.sizes());
  }
  // where, not a product: a -inf log-probability outside the completion must not turn the sum into NaN.
  return at::where(mask != 0, token_logprobs, at::zeros({}, token_logprobs.options())).sum(-1);
}

}  // namespace dew::objectives
