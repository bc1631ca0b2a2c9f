#pragma once
// Image classification: cross entropy of an ImageClassifier's logits on batches {"images": float
// [B, C, H, W] in [-1, 1], "labels": int64 [B]}. Reports "loss" (mean cross entropy) and "accuracy";
// evaluation reports the same over the validation split. What `dew train classifier` trains.
#include "dew/nn/vision/image_classifier.h"
#include "dew/objectives/objective.h"

namespace dew::objectives {

class ClassifierObjective final : public Objective {
 public:
  explicit ClassifierObjective(nn::vision::ImageClassifier model);
  std::string name() const override { return "classifier"; }
  std::string count_unit() const override { return "images"; }
  void init(std::uint64_t seed) override { model_->init_parameters(seed); }
  torch::nn::Module& module() override { return *model_; }
  Loss loss(const data::Batch& batch, std::int64_t step) override;
  Statistics evaluate(const data::Batch& batch) override;
  nlohmann::ordered_json config_json() const override;
  nn::vision::ImageClassifier& model() { return model_; }

 private:
  nn::vision::ImageClassifier model_;
};

}  // namespace dew::objectives
