#include "dew/runs/kinds/diffusion_kind.h"

#include "dew/core/error.h"
#include "dew/data/images/png.h"
#include "dew/runs/image_kind.h"
#include "dew/runs/kind_defaults.h"
#include "dew/runs/kinds/diffusion_sampling.h"
#include "dew/runs/kinds/sample_quality.h"

namespace fs = std::filesystem;

namespace dew::runs {

DiffusionRunConfig::DiffusionRunConfig() { apply_kind_defaults(*this, "diffusion"); }  // configs/kinds/diffusion.json

namespace {

class DiffusionTask final : public TypedImageTask<DiffusionRunConfig> {
 public:
  using TypedImageTask::TypedImageTask;
  const char* kind() const override { return "diffusion"; }

  void adopt_data(const data::images::ImageSet& train) override {
    auto& m = config_.model;
    m.image_size = config_.data.image_size > 0 ? config_.data.image_size : train.height();
    m.channels = train.channels();
    m.num_classes = train.num_classes() >= 2 ? train.num_classes() : 0;  // unlabelled images: unconditional
    m.validate();
    config_.diffusion.validate();
    const processes::NoiseProcess process(config_.diffusion.process_config());
    config_.sample.validate(process.kind(), "sample");
    if (config_.preview.per_class < 0) fail("preview.per_class must be >= 0 (0 = no preview), got ", config_.preview.per_class);
  }

  std::shared_ptr<torch::nn::Module> build_model() const override { return nn::diffusion::make_image_model(config_.model); }

  std::unique_ptr<objectives::Objective> objective(std::shared_ptr<torch::nn::Module> model) const override {
    return std::make_unique<objectives::diffusion::DiffusionObjective>(objectives::diffusion::diffusion_model(typed(model)),
                                                                       config_.diffusion, config_.trainer.seed);
  }

  std::string describe_model() const override {
    const auto& m = config_.model;
    const std::string shape = m.kind == "dit" ? str("DiT ", m.depth, " layers x ", m.dim, " features, patch ", m.patch_size)
                                              : str("UNet ", m.base_channels, " base channels");
    return str(shape, ", ", nn::diffusion::parameter_count(m), " parameters; ", config_.diffusion.process, " process predicting ",
               processes::to_string(config_.diffusion.resolved_prediction()));
  }

  // Training FLOPs per image: forward + backward ~ 3x the forward's.
  double flops_per_image() const override { return 3 * nn::diffusion::image_model_flops(config_.model); }
  // `dew sample`: the run's sample section, overridden by the request, into a labelled grid.
  std::optional<SampleResult> sample(const ImageRun& run, const SampleRequest& request) const override;

  void after_evaluation(torch::nn::Module& model, const data::images::ImageSet& train, const fs::path& run_dir,
                        std::int64_t step, std::FILE* out) const override {
    if (config_.preview.per_class == 0) return;
    const auto& m = config_.model;
    const std::int64_t classes = std::max<std::int64_t>(m.num_classes, 1);
    ImageDrawRequest request;
    request.labels = m.num_classes > 0 ? labels_by_class(m.num_classes, config_.preview.per_class)
                                       : std::vector<std::int64_t>(static_cast<std::size_t>(config_.preview.per_class), 0);
    request.seed = config_.preview.seed;
    request.sampler = config_.sample;
    const at::Tensor images = draw_images(typed(model.shared_from_this()), config_.diffusion, request);
    const fs::path file = run_dir / "samples" / str("step-", step, ".png");
    fs::create_directories(file.parent_path());
    std::vector<std::string> rows;
    for (std::int64_t c = 0; c < classes; ++c) {
      rows.push_back(m.num_classes > 0 && c < train.num_classes() ? train.class_names[static_cast<std::size_t>(c)] : "");
    }
    data::images::GridOptions grid;
    grid.scale = m.image_size < 64 ? 2 : 1;
    data::images::write_image_grid(file, images, config_.preview.per_class, rows, grid);
    if (out) std::fprintf(out, "preview '%s'\n", file.c_str());
  }

  objectives::Statistics evaluate_extra(torch::nn::Module& model, const data::images::ImageSet& real,
                                        const EvalOptions& options, std::vector<std::string>* notes) const override {
    objectives::Statistics stats;
    const std::int64_t samples = options.samples.value_or(500);
    if (samples == 0) return stats;
    const auto& m = config_.model;
    std::string why;
    auto classifier = reference_classifier(m.channels, m.image_size, m.num_classes, &why);
    if (!classifier) {
      notes->push_back(why);
      return stats;
    }
    classifier->get()->to(model.parameters().front().device());
    ImageDrawRequest request;
    for (std::int64_t i = 0; i < samples; ++i) request.labels.push_back(m.num_classes > 0 ? i % m.num_classes : 0);
    request.seed = options.seed;
    request.sampler = config_.sample;
    if (options.sample_steps) request.sampler.steps = *options.sample_steps;
    const at::Tensor generated = draw_images(typed(model.shared_from_this()), config_.diffusion, request);
    const std::int64_t n_real = std::min<std::int64_t>(real.size(), std::max<std::int64_t>(samples, 2000));
    const at::Tensor real_images = real.pixels.narrow(0, 0, n_real).to(at::kFloat).div(127.5).sub(1.0);
    const SampleQuality q = sample_quality(*classifier, real_images, generated, at::tensor(request.labels, at::kLong));
    stats.add("frechet_distance", q.frechet_distance, 1);
    stats.add("class_accuracy", q.class_accuracy * static_cast<double>(samples), static_cast<double>(samples));
    notes->push_back(str("frechet_distance and class_accuracy: ", samples, " samples (", request.sampler.solver, ", ",
                         request.sampler.steps, " steps, guidance ", request.sampler.guidance.scale, ") against ", n_real,
                         " validation images, in the features of dew's Fashion-MNIST classifier (not Inception: "
                         "comparable between dew runs only)"));
    return stats;
  }

 public:
  static std::shared_ptr<nn::diffusion::ImageModelImpl> typed(const std::shared_ptr<torch::nn::Module>& model) {
    auto typed = std::dynamic_pointer_cast<nn::diffusion::ImageModelImpl>(model);
    if (!typed) fail("internal: the diffusion run was handed another model");
    return typed;
  }
};

}  // namespace

namespace {

std::optional<SampleResult> DiffusionTask::sample(const ImageRun& run, const SampleRequest& request) const {
  const auto& c = config_;
  const auto& m = c.model;
  ImageDrawRequest draw;
  draw.seed = request.seed;
  draw.sampler = c.sample;
  if (request.solver) draw.sampler.solver = *request.solver;
  if (request.spacing) draw.sampler.spacing = *request.spacing;
  if (request.steps) draw.sampler.steps = *request.steps;
  if (request.cfg_scale) draw.sampler.guidance.scale = *request.cfg_scale;
  if (request.eta) draw.sampler.eta = *request.eta;
  const processes::NoiseProcess process(c.diffusion.process_config());
  draw.sampler.validate(process.kind(), "sample");
  if (request.per_label < 1) fail("--n must be >= 1 (samples per label), got ", request.per_label);
  std::vector<std::int64_t> rows = request.labels;
  if (rows.empty()) {
    for (std::int64_t l = 0; l < std::max<std::int64_t>(m.num_classes, 1); ++l) rows.push_back(m.num_classes > 0 ? l : 0);
  }
  for (auto l : rows) {
    if (l < 0 || (m.num_classes > 0 && l >= m.num_classes) || (m.num_classes == 0 && l != 0)) {
      fail("--labels holds ", l, "; this model has ", m.num_classes == 0 ? std::string("no classes (use 0 or omit --labels)")
                                                                        : str(m.num_classes, " classes, 0..", m.num_classes - 1));
    }
    draw.labels.insert(draw.labels.end(), static_cast<std::size_t>(request.per_label), l);
  }
  SampleResult result;
  auto model = run.load_model(request.live, request.step, request.device, &result.checkpoint);
  const at::Tensor images = draw_images(DiffusionTask::typed(model), c.diffusion, draw);
  const auto class_names = run.train_images().class_names;
  std::vector<std::string> row_names;
  for (auto l : rows) row_names.push_back(m.num_classes > 0 && l < static_cast<std::int64_t>(class_names.size()) ? class_names[static_cast<std::size_t>(l)] : "");
  data::images::GridOptions grid;
  grid.scale = m.image_size < 64 ? 2 : 1;
  if (request.grid.has_parent_path()) fs::create_directories(request.grid.parent_path());
  data::images::write_image_grid(request.grid, images, request.per_label, row_names, grid);
  if (request.images_dir) {
    fs::create_directories(*request.images_dir);
    for (std::int64_t i = 0; i < images.size(0); ++i) {
      const auto label = draw.labels[static_cast<std::size_t>(i)];
      data::images::write_png(*request.images_dir / str(i, "-label", label, ".png"), images[i]);
    }
  }
  result.images = images.size(0);
  result.sampler = str(draw.sampler.solver, ", ", draw.sampler.steps, " steps, guidance ", draw.sampler.guidance.scale);
  return result;
}

}  // namespace

std::unique_ptr<RunKind> make_diffusion_kind() {
  return std::make_unique<ImageKind<DiffusionRunConfig, DiffusionTask>>(
      "diffusion", "Train a class-conditional image diffusion model (DiT or UNet; flow, vp or edm)");
}

}  // namespace dew::runs
