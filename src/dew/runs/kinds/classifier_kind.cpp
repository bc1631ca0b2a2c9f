#include "dew/runs/kinds/classifier_kind.h"

#include "dew/core/error.h"
#include "dew/nn/parameter_count.h"
#include "dew/objectives/classifier_objective.h"
#include "dew/runs/image_kind.h"

namespace dew::runs {
namespace {

class ClassifierTask final : public TypedImageTask<ClassifierRunConfig> {
 public:
  using TypedImageTask::TypedImageTask;
  const char* kind() const override { return "classifier"; }

  void adopt_data(const data::images::ImageSet& train) override {
    auto& m = config_.model;
    m.image_size = config_.data.image_size > 0 ? config_.data.image_size : train.height();
    m.channels = train.channels();
    m.num_classes = train.num_classes();
    if (m.num_classes < 2) {
      fail("the images in '", config_.data.path, "' have ", m.num_classes, " classes; a classifier needs labelled images of at least two");
    }
    m.validate();
  }

  std::shared_ptr<torch::nn::Module> build_model() const override {
    return nn::vision::ImageClassifier(config_.model).ptr();
  }

  std::unique_ptr<objectives::Objective> objective(std::shared_ptr<torch::nn::Module> model) const override {
    auto typed = std::dynamic_pointer_cast<nn::vision::ImageClassifierImpl>(model);
    if (!typed) fail("internal: the classifier run was handed another model");
    return std::make_unique<objectives::ClassifierObjective>(nn::vision::ImageClassifier(typed));
  }

  std::string describe_model() const override {
    std::int64_t params = 0;
    for (const auto& p : build_model()->parameters()) params += p.numel();
    std::string widths;
    for (auto w : config_.model.widths) widths += (widths.empty() ? "" : ",") + std::to_string(w);
    return str("CNN classifier, stage widths ", widths, ", ", params, " parameters");
  }
};

}  // namespace

std::unique_ptr<RunKind> make_classifier_kind() {
  return std::make_unique<ImageKind<ClassifierRunConfig, ClassifierTask>>(
      "classifier", "Train an image classifier (cross entropy) on labelled images");
}

}  // namespace dew::runs
