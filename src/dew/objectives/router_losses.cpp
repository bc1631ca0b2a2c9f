#include "dew/objectives/router_losses.h"

#include "dew/core/error.h"

namespace dew::objectives {

RouterLosses router_losses(const std::vector<nn::RouterRecord>& records, std::int64_t num_experts, const at::Tensor& mask) {
  if (records.empty()) dew::fail("router_losses: the model recorded no router decisions (a dense model, or no forward yet)");
  const auto options = records[0].logits.options().dtype(at::kFloat);
  auto slots = at::zeros({num_experts}, options), probability = at::zeros({num_experts}, options);
  auto z = at::zeros({}, options);
  at::Tensor rows;  // real tokens over all layers
  for (const auto& record : records) {
    const auto tokens = record.logits.size(0), k = record.chosen.size(1);
    const auto m = mask.defined() ? mask.reshape(-1).to(options) : at::ones({tokens}, options);
    const auto logits = record.logits.to(at::kFloat);
    slots = slots + at::zeros({num_experts}, options).scatter_add(0, record.chosen.reshape(-1), m.repeat_interleave(k));
    probability = probability + (at::softmax(logits, -1) * m.unsqueeze(1)).sum(0);
    z = z + (at::logsumexp(logits, -1).square() * m).sum();
    rows = rows.defined() ? rows + m.sum() : m.sum();
  }
  const auto k = static_cast<double>(records[0].chosen.size(1));
  RouterLosses out;
  // transformers divides both sums by the rows (not the slots): f_e sums to k, and the loss is k at uniform
  // routing; dividing f by k gives Switch's normalisation without changing where the gradient points.
  out.aux = (slots / rows * (probability / rows)).sum() * static_cast<double>(num_experts);
  out.z = z / rows;
  out.load = (slots / (rows * k)).detach();
  return out;
}

void add_router_losses(nn::CausalTransformerImpl& model, const at::Tensor& mask, Loss& loss) {
  const auto& c = model.config();
  auto records = model.take_router_records();
  if (!c.has_moe() || records.empty()) return;
  auto terms = router_losses(records, c.num_experts, mask);
  const double count = loss.count;
  if (c.router_aux_loss_coef > 0 || c.router_z_loss_coef > 0) {
    loss.sum = loss.sum + (terms.aux * c.router_aux_loss_coef + terms.z * c.router_z_loss_coef) * count;
  }
  loss.metrics.add("moe/aux_loss", terms.aux.detach().item<double>() * count, count);
  loss.metrics.add("moe/z_loss", terms.z.detach().item<double>() * count, count);
  loss.metrics.add("moe/expert_load_max", terms.load.max().item<double>() * count, count);
  loss.metrics.add("moe/expert_load_min", terms.load.min().item<double>() * count, count);
}

}  // namespace dew::objectives
