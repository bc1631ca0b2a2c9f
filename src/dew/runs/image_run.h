#pragma once
// The life cycle every image run kind shares (diffusion, classifier); the kind's ImageTask supplies its
// model, objective and evaluation extras.
//
//   auto run = ImageRun::start("runs/fashion", std::move(task));  // a fresh run, or resume the one there
//   run->train(stdout);
//
// start() reads the training images and checks every section against them before anything is written; a
// fresh run writes run.json (no tokenizer), a directory that already holds a run is resumed, and then only
// trainer.* may differ. Batches: ImageBatches (data/images), shuffled from trainer.seed and resumable at the
// exact image; validation images unshuffled.
#include <filesystem>
#include <memory>
#include <optional>

#include "dew/data/images/image_batches.h"
#include "dew/runs/image_task.h"
#include "dew/runs/run.h"
#include "dew/runs/run_directory.h"

namespace dew::runs {

class ImageRun final : public Run {
 public:
  static std::unique_ptr<ImageRun> start(const std::filesystem::path& run_dir, std::unique_ptr<ImageTask> task);
  static std::unique_ptr<ImageRun> open(const std::filesystem::path& run_dir, const RunFile& file,
                                        std::unique_ptr<ImageTask> task);

  const ImageTask& task() const { return *task_; }

  std::string describe() const override;
  training::FitResult train(std::FILE* out) override;
  objectives::Statistics evaluate(const EvalOptions& options, std::filesystem::path* loaded = nullptr) override;
  std::string validation_loss() const override { return "loss"; }
  std::string validation_unit() const override { return "images"; }
  const training::TrainerConfig& trainer_config() const override { return task_->sections().trainer; }
  config::Json config_json() const override { return task_->config_json(); }
  LoadedModel load_decoder(const ModelLoadOptions& options) const override;
  SampleResult sample(const SampleRequest& request) const override;
  ProbeResult probe(const ProbeRequest& request) const override;

  // The model with a checkpoint's weights (the newest, or `step`; EMA unless `live`), on trainer.device or
  // `device`, in eval mode; the step directory read goes to `loaded`.
  std::shared_ptr<torch::nn::Module> load_model(bool live = false, std::optional<std::int64_t> step = std::nullopt,
                                                const std::string& device = "", std::filesystem::path* loaded = nullptr) const;
  // The training images (read once, then kept) and the validation batches (null when data.val is none).
  const data::images::ImageSet& train_images() const;
  std::unique_ptr<data::images::ImageBatches> validation_batches() const;

 private:
  ImageRun(const std::filesystem::path& dir, std::unique_ptr<ImageTask> task, bool resumed);

  std::unique_ptr<ImageTask> task_;
  mutable std::optional<data::images::ImageSet> train_;
};

}  // namespace dew::runs
