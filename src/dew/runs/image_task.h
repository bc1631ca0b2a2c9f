#pragma once
// What an image run kind (diffusion, classifier, jepa) adds to the shared image-run life cycle
// (image_run.h): its config, its model and objective, and what it does at evaluations. A row of the run-kind
// table made from a task by image_kind.h.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <torch/nn/module.h>

#include "dew/core/config.h"
#include "dew/data/images/image_set.h"
#include "dew/objectives/objective.h"
#include "dew/runs/image_sections.h"
#include "dew/runs/run.h"
#include "dew/runs/run_verbs.h"
#include "dew/runs/typed_task.h"

namespace dew::runs {

class ImageRun;

class ImageTask {
 public:
  virtual ~ImageTask() = default;
  virtual const char* kind() const = 0;
  virtual ImageSections& sections() = 0;
  const ImageSections& sections() const { return const_cast<ImageTask*>(this)->sections(); }
  virtual config::Json config_json() const = 0;
  // `stored` read into this task's config type and written back: the form config_json() compares with.
  virtual config::Json canonical_config(const config::Json& stored, const std::string& source) const = 0;

  // Takes what the model must match from the training images (size, channels, classes) and validates the
  // kind's own sections; refusals name the field and the value.
  virtual void adopt_data(const data::images::ImageSet& train) = 0;
  // The model with seed-0 parameters, on the CPU.
  virtual std::shared_ptr<torch::nn::Module> build_model() const = 0;
  virtual std::unique_ptr<objectives::Objective> objective(std::shared_ptr<torch::nn::Module> model) const = 0;
  // "DiT 6 layers x 256 features, 4.9 M parameters": for the line `dew train` starts with.
  virtual std::string describe_model() const = 0;
  // Training FLOPs per image (the MFU numerator); 0 = the trainer's 6 x parameters estimate.
  virtual double flops_per_image() const { return 0; }
  // Called after each evaluation during training, with the weights evaluation used (EMA when kept), in
  // eval mode and without gradients: a diffusion run writes its preview grid here.
  virtual void after_evaluation(torch::nn::Module& model, const data::images::ImageSet& train,
                                const std::filesystem::path& run_dir, std::int64_t step, std::FILE* out) const {}
  // Figures `dew eval` adds to the validation loss, with the weights it evaluated (eval mode) and real
  // validation images to compare with: a diffusion run's sample quality. Notes for the user go to `notes`.
  virtual objectives::Statistics evaluate_extra(torch::nn::Module& model, const data::images::ImageSet& real,
                                                const EvalOptions& options, std::vector<std::string>* notes) const {
    return {};
  }
  // The optional verbs (run_verbs.h) a kind answers, with the run's data and checkpoints; nullopt = this
  // kind does not, and the run's default refusal speaks.
  virtual std::optional<SampleResult> sample(const ImageRun& run, const SampleRequest& request) const { return std::nullopt; }
  virtual std::optional<ProbeResult> probe(const ImageRun& run, const ProbeRequest& request) const { return std::nullopt; }
};

// An ImageTask over a typed Config (typed_task.h).
template <class Config>
class TypedImageTask : public TypedTask<ImageTask, Config> {
 public:
  using TypedTask<ImageTask, Config>::TypedTask;
};

}  // namespace dew::runs
