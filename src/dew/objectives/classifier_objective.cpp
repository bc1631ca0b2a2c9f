#include "dew/objectives/classifier_objective.h"

#include "dew/core/config.h"
#include "dew/core/error.h"

namespace dew::objectives {
namespace {

struct Scored {
  at::Tensor loss_sum;
  double correct = 0, count = 0;
};

Scored score(nn::vision::ImageClassifier& model, const data::Batch& batch) {
  const at::Tensor images = batch.get("images"), labels = batch.get("labels");
  const auto device = model->parameters().front().device();
  const at::Tensor logits = model->forward(images.to(device));
  const at::Tensor y = labels.to(device, at::kLong);
  const auto classes = model->config().num_classes;
  if (y.numel() > 0) {
    auto range = at::aminmax(y);
    const auto lo = std::get<0>(range).item<std::int64_t>(), hi = std::get<1>(range).item<std::int64_t>();
    if (lo < 0 || hi >= classes) fail("label ", lo < 0 ? lo : hi, " is outside the classifier's ", classes, " classes [0, ", classes, ")");
  }
  Scored out;
  out.loss_sum = at::cross_entropy_loss(logits, y, {}, at::Reduction::Sum);
  out.correct = (logits.argmax(-1) == y).sum().item<double>();
  out.count = static_cast<double>(y.size(0));
  return out;
}

}  // namespace

ClassifierObjective::ClassifierObjective(nn::vision::ImageClassifier model) : model_(std::move(model)) {}

Loss ClassifierObjective::loss(const data::Batch& batch, std::int64_t) {
  Scored s = score(model_, batch);
  Loss out;
  out.sum = s.loss_sum;
  out.count = s.count;
  out.metrics.add("accuracy", s.correct, s.count);
  return out;
}

Statistics ClassifierObjective::evaluate(const data::Batch& batch) {
  at::NoGradGuard no_grad;
  Scored s = score(model_, batch);
  Statistics stats;
  stats.add("loss", s.loss_sum.item<double>(), s.count);
  stats.add("accuracy", s.correct, s.count);
  return stats;
}

nlohmann::ordered_json ClassifierObjective::config_json() const {
  nlohmann::ordered_json j;
  j["model"] = config::to_json(model_->config());
  return j;
}

}  // namespace dew::objectives
