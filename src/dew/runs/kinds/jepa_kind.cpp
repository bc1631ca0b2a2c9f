#include "dew/runs/kinds/jepa_kind.h"

#include <algorithm>

#include "dew/core/error.h"
#include "dew/runs/image_kind.h"

namespace dew::runs {
namespace {

class JepaTask final : public TypedImageTask<JepaRunConfig> {
 public:
  using TypedImageTask::TypedImageTask;
  const char* kind() const override { return "jepa"; }

  void adopt_data(const data::images::ImageSet& train) override {
    auto& m = config_.model;
    m.image_size = config_.data.image_size > 0 ? config_.data.image_size : train.height();
    m.channels = train.channels();
    m.validate();
    config_.jepa.validate();
  }

  std::shared_ptr<torch::nn::Module> build_model() const override { return objectives::jepa::JepaNetworks(config_.model).ptr(); }

  std::unique_ptr<objectives::Objective> objective(std::shared_ptr<torch::nn::Module> model) const override {
    auto typed = std::dynamic_pointer_cast<objectives::jepa::JepaNetworksImpl>(model);
    if (!typed) fail("internal: the JEPA run was handed another model");
    return std::make_unique<objectives::jepa::JepaObjective>(objectives::jepa::JepaNetworks(typed), config_.jepa, config_.trainer.seed);
  }

  // Approximate training FLOPs per image, for MFU: 2 x weights x tokens per pass (attention scores and the
  // patch embedding ignored), with the mask sizes at the middle of their ranges: the target encoder's
  // forward on all N patches, the context encoder's forward and backward (3x) on the context, the
  // predictor's on context + one target block, once per target block.
  double flops_per_image() const override {
    const auto& m = config_.model;
    const auto& k = config_.jepa.masks;
    auto block_weights = [&](double d, double depth) { return depth * (4 * d * d + 2 * d * d * m.mlp_ratio); };
    const double n = static_cast<double>(m.patches());
    const double kt = n * 0.5 * (k.target_scale.first + k.target_scale.second);
    const double kc = std::max(1.0, n * 0.5 * (k.context_scale.first + k.context_scale.second) - static_cast<double>(k.num_targets) * kt);
    const double encoder = block_weights(static_cast<double>(m.dim), static_cast<double>(m.depth));
    const double predictor = block_weights(static_cast<double>(m.predictor_dim), static_cast<double>(m.predictor_depth)) +
                             2.0 * static_cast<double>(m.dim * m.predictor_dim);
    return 2 * encoder * n + 6 * encoder * kc + 6 * predictor * static_cast<double>(k.num_targets) * (kc + kt);
  }

  std::string describe_model() const override {
    std::int64_t params = 0;
    for (const auto& p : build_model()->parameters()) params += p.numel();
    const auto& m = config_.model;
    return str("ViT ", m.depth, " layers x ", m.dim, " features, patch ", m.patch_size, " (", m.grid(), "x", m.grid(),
               " patches), predictor ", m.predictor_depth, " x ", m.predictor_dim, "; ", params, " trained parameters");
  }
};

}  // namespace

std::unique_ptr<RunKind> make_jepa_kind() {
  return std::make_unique<ImageKind<JepaRunConfig, JepaTask>>(
      "jepa", "I-JEPA representation learning on images: predict masked blocks' features from the visible context");
}

}  // namespace dew::runs
