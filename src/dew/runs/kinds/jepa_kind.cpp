#include "dew/runs/kinds/jepa_kind.h"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "dew/core/error.h"
#include "dew/data/images/image_set.h"
#include "dew/objectives/jepa/probes.h"
#include "dew/runs/image_kind.h"
#include "dew/telemetry/plot.h"
#include "dew/training/checkpoint.h"

namespace dew::runs {
namespace {

namespace fs = std::filesystem;


// Mean-pooled features [N, dim] of uint8 images [N, C, S, S], in batches, without gradients.
at::Tensor pooled_features(nn::vision::VisionTransformerImpl& encoder, const at::Tensor& pixels) {
  at::NoGradGuard no_grad;
  encoder.eval();
  const auto device = encoder.parameters().front().device();
  std::vector<at::Tensor> out;
  constexpr std::int64_t kBatch = 512;
  for (std::int64_t start = 0; start < pixels.size(0); start += kBatch) {
    const auto images = pixels.narrow(0, start, std::min(kBatch, pixels.size(0) - start)).to(device).to(at::kFloat).div(127.5).sub(1.0);
    out.push_back(encoder.forward(images).mean(1).to(at::kCPU));
  }
  return at::cat(out);
}

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

  // The kNN probe at this evaluation (jepa.probe_every), on training images only: the first probe_images
  // are the neighbours, the next probe_queries are classified. Logged to tracking/probe.jsonl (one line per
  // probe, kept across resumes) and plotted to tracking/probe_knn_top1.png.
  void after_evaluation(torch::nn::Module& model, const data::images::ImageSet& train, const fs::path& run_dir,
                        std::int64_t step, std::FILE* out) const override {
    const auto& j = config_.jepa;
    if (j.probe_every <= 0 || step % j.probe_every != 0) return;
    if (train.num_classes() < 2) return;  // unlabelled images: nothing to probe
    const std::int64_t bank = std::min(j.probe_images, train.size() / 2);
    const std::int64_t queries = std::min(j.probe_queries, train.size() - bank);
    if (bank < 1 || queries < 1) return;
    auto& encoder = *dynamic_cast<objectives::jepa::JepaNetworksImpl&>(model).encoder;
    const auto features = pooled_features(encoder, train.pixels.narrow(0, 0, bank + queries));
    const double top1 = objectives::jepa::knn_top1(features.narrow(0, 0, bank), train.labels.narrow(0, 0, bank),
                                                   features.narrow(0, bank, queries), train.labels.narrow(0, bank, queries),
                                                   train.num_classes());
    const fs::path log = run_dir / "tracking" / "probe.jsonl";
    fs::create_directories(log.parent_path());
    {
      std::ofstream file(log, std::ios::app);
      file << nlohmann::json{{"step", step}, {"knn_top1", top1}}.dump() << "\n";
    }
    telemetry::PlotSeries series{"kNN top-1", {}};
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      const auto row = nlohmann::json::parse(line, nullptr, false);
      if (row.is_object() && row.contains("step") && row.contains("knn_top1")) series.points.emplace_back(row["step"].get<double>(), row["knn_top1"].get<double>());
    }
    telemetry::write_line_plot(run_dir / "tracking" / "probe_knn_top1.png", {series},
                               {.title = "kNN probe (training images)", .y_label = "top-1"});
    if (out) std::fprintf(out, "probe/knn_top1 %.4f (%lld neighbours, %lld queries)\n", top1, static_cast<long long>(bank), static_cast<long long>(queries));
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

  // `dew probe`: kNN or linear probes of the encoder's features, beside a random encoder and raw pixels.
  std::optional<ProbeResult> probe(const ImageRun& run, const ProbeRequest& request) const override;
  std::string describe_model() const override {
    std::int64_t params = 0;
    for (const auto& p : build_model()->parameters()) params += p.numel();
    const auto& m = config_.model;
    return str("ViT ", m.depth, " layers x ", m.dim, " features, patch ", m.patch_size, " (", m.grid(), "x", m.grid(),
               " patches), predictor ", m.predictor_depth, " x ", m.predictor_dim, "; ", params, " trained parameters");
  }
};

}  // namespace

namespace {

std::optional<ProbeResult> JepaTask::probe(const ImageRun& run, const ProbeRequest& request) const {
  if (request.method != "knn" && request.method != "linear") fail("--method must be knn or linear, got \"", request.method, "\"");
  const auto& c = config_;
  const std::string path = request.data.empty() ? c.data.path : request.data;
  auto train = data::images::read_images(path, "train");
  data::images::ImageSet test;
  std::string test_split = "t10k";
  if (data::images::has_test_split(path)) {
    test = data::images::read_images(path, "t10k");
  } else {
    // No test split (an image directory, or IDX files without t10k): hold images out of the training set as
    // the run's validation does -- the same share and seed, so on the run's own data they are the images the
    // encoder never trained on (with data.val = holdout).
    const double fraction = c.data.val_fraction > 0 && c.data.val_fraction < 1 ? c.data.val_fraction : 0.05;
    const auto split = data::images::holdout_split(train.size(), fraction, c.trainer.seed);
    test = data::images::subset(train, split.second);
    train = data::images::subset(train, split.first);
    test_split = str("holdout (", fraction, " of the training images, seed ", c.trainer.seed, ")");
  }
  const auto& m = c.model;
  for (const auto* set : {&train, &test}) {
    if (set->channels() != m.channels || set->height() != m.image_size || set->width() != m.image_size) {
      fail("'", path, "' holds ", set->channels(), "x", set->height(), "x", set->width(), " images; the encoder reads ", m.channels, "x",
           m.image_size, "x", m.image_size);
    }
  }
  const std::int64_t classes = std::max(train.num_classes(), test.num_classes());
  if (classes < 2) fail("'", path, "' has no class labels; a probe needs labelled images");
  if (request.max_train > 0 && request.max_train < train.size()) {
    train.pixels = train.pixels.narrow(0, 0, request.max_train);
    train.labels = train.labels.narrow(0, 0, request.max_train);
  }

  ProbeResult result;
  result.method = request.method;
  result.train_images = train.pixels.size(0);
  result.test_images = test.pixels.size(0);
  result.test_split = test_split;
  auto score = [&](const at::Tensor& train_features, const at::Tensor& test_features) {
    if (request.method == "knn") {
      return objectives::jepa::knn_top1(train_features, train.labels, test_features, test.labels, classes, request.k, request.temperature);
    }
    objectives::jepa::LinearProbeOptions options;
    options.steps = request.linear_steps;
    return objectives::jepa::linear_top1(train_features, train.labels, test_features, test.labels, classes, options);
  };
  std::filesystem::path loaded;
  auto model = std::dynamic_pointer_cast<objectives::jepa::JepaNetworksImpl>(run.load_model(/*live=*/true, request.step, request.device, &loaded));
  if (!model) fail("internal: the JEPA run loaded another model");
  result.checkpoint = loaded.string();
  result.encoder = request.encoder;
  if (request.encoder == "target") {
    // The target encoder lives in the checkpoint's objective state ("target.<parameter>").
    const training::Checkpoint checkpoint(loaded);
    if (!checkpoint.objective_state()) fail("checkpoint '", loaded.string(), "' holds no target encoder (objective.safetensors)");
    const auto state = training::Checkpoint::tensors(*checkpoint.objective_state());
    at::NoGradGuard no_grad;
    for (auto& item : model->encoder->named_parameters()) {
      auto it = state.find("target." + item.key());
      if (it == state.end()) fail("checkpoint '", loaded.string(), "' lacks the target encoder's '", item.key(), "'");
      item.value().copy_(it->second);
    }
  } else if (request.encoder != "context") {
    fail("--encoder must be target or context, got \"", request.encoder, "\"");
  }
  result.top1 = score(pooled_features(*model->encoder, train.pixels), pooled_features(*model->encoder, test.pixels));
  // The run's own initialisation (trainer.seed), before any training.
  nn::vision::VisionTransformer fresh(m);
  fresh->init_parameters(c.trainer.seed);
  fresh->to(model->encoder->parameters().front().device());
  result.random_init_top1 = score(pooled_features(*fresh, train.pixels), pooled_features(*fresh, test.pixels));
  auto pixels = [](const at::Tensor& p) { return p.flatten(1).to(at::kFloat).div(127.5).sub(1.0); };
  result.pixels_top1 = score(pixels(train.pixels), pixels(test.pixels));
  return result;
}

}  // namespace

std::unique_ptr<RunKind> make_jepa_kind() {
  return std::make_unique<ImageKind<JepaRunConfig, JepaTask>>(
      "jepa", "I-JEPA representation learning on images: predict masked blocks' features from the visible context");
}

}  // namespace dew::runs
