#include "dew/runs/image_run.h"

#include <system_error>

#include "dew/core/error.h"
#include "dew/data/images/image_fit.h"
#include "dew/data/prefetcher.h"
#include "dew/distributed/process_place.h"
#include "dew/nn/device.h"
#include "dew/nn/parameter_count.h"
#include "dew/runs/run_life_cycle.h"
#include "dew/training/checkpoint.h"
#include "dew/training/evaluate.h"
#include "dew/training/trainer.h"

namespace fs = std::filesystem;

namespace dew::runs {

namespace {

// Whether `path` is a directory holding an IDX test split (t10k-images-idx3-ubyte, gzipped or not).
// data.val resolved: "test", "holdout" or "none".
std::string validation_kind(const ImageDataConfig& data) {
  if (data.val != "auto") return data.val;
  return data::images::has_test_split(data.path) ? "test" : "holdout";
}

data::images::ImageBatchOptions batch_options(const ImageSections& s, bool train) {
  data::images::ImageBatchOptions o;
  o.seed = s.trainer.seed;
  o.shuffle = train;
  o.size = s.data.image_size;
  o.fit = data::images::parse_fit(s.data.fit);
  o.flip = train && s.data.flip;
  o.rank = distributed::process_place().rank;  // this process's shard (runs/loader_shard.h)
  o.world = distributed::process_place().world;
  return o;
}

}  // namespace

void ImageDataConfig::validate() const {
  if (path.empty()) fail("data.path is empty; pass --data with an IDX file or directory, or a directory of images");
  if (val != "auto" && val != "test" && val != "holdout" && val != "none") {
    fail("data.val must be auto, test, holdout or none, got \"", val, "\"");
  }
  if (!(val_fraction > 0 && val_fraction < 1) && val == "holdout") {
    fail("data.val_fraction must be in (0, 1) to hold images out, got ", val_fraction);
  }
  if (image_size < 0) fail("data.image_size must be >= 0 (0 = as stored), got ", image_size);
  if (prefetch < 0) fail("data.prefetch must be >= 0 (0 = none), got ", prefetch);
  (void)data::images::parse_fit(fit);
  if (val == "test" && !data::images::has_test_split(path)) {
    fail("data.val = test needs an IDX directory with a t10k split, but '", path, "' has none; use data.val=holdout");
  }
}

ImageRun::ImageRun(const fs::path& dir, std::unique_ptr<ImageTask> task, bool resumed)
    : Run(dir, task->kind(), resumed), task_(std::move(task)) {}

const data::images::ImageSet& ImageRun::train_images() const {
  if (!train_) train_ = data::images::read_images(task_->sections().data.path, "train");
  return *train_;
}

std::unique_ptr<ImageRun> ImageRun::start(const fs::path& run_dir, std::unique_ptr<ImageTask> task) {
  auto& s = task->sections();
  if (!s.data.path.empty()) s.data.path = fs::absolute(s.data.path).lexically_normal().string();
  s.data.validate();
  s.optim.validate();
  s.trainer.validate();
  (void)nn::resolve_device(s.trainer.device);  // cuda without a GPU: refused here
  // The images decide the model's input size, channels and classes (read before anything is written).
  data::images::ImageSet train = data::images::read_images(s.data.path, "train");
  if (s.data.image_size == 0 && train.height() != train.width()) {
    fail("the images in '", s.data.path, "' are ", train.height(), "x", train.width(), "; the models need square images: "
         "set data.image_size (and data.fit) to fit them to a square");
  }
  task->adopt_data(train);
  if (holds_run(run_dir)) {
    RunFile stored = read_run_to_resume(run_dir, task->kind());
    record_resumed_config(run_dir, stored, task->canonical_config(stored.config, run_file_path(run_dir).string()), task->config_json());
    std::unique_ptr<ImageRun> run(new ImageRun(run_dir, std::move(task), /*resumed=*/true));
    run->train_ = std::move(train);
    return run;
  }
  check_fresh_run_dir(run_dir);
  fs::create_directories(run_dir);
  std::unique_ptr<ImageRun> run(new ImageRun(run_dir, std::move(task), /*resumed=*/false));
  run->train_ = std::move(train);
  write_run_file(run_dir, RunFile{run->task_->kind(), "", run->task_->config_json(), ""});
  return run;
}

std::unique_ptr<ImageRun> ImageRun::open(const fs::path& run_dir, const RunFile& file, std::unique_ptr<ImageTask> task) {
  (void)file;
  return std::unique_ptr<ImageRun>(new ImageRun(run_dir, std::move(task), /*resumed=*/true));
}

std::string ImageRun::describe() const {
  const auto& s = task_->sections();
  const auto& train = train_images();
  return str(train.size(), " images ", train.channels(), "x", train.height(), "x", train.width(), " in ", train.num_classes(),
             " classes from ", train.source, ", validation: ", validation_kind(s.data), "; ", task_->describe_model());
}

std::unique_ptr<data::images::ImageBatches> ImageRun::validation_batches() const {
  const auto& s = task_->sections();
  const std::string kind = validation_kind(s.data);
  if (kind == "none") return nullptr;
  if (kind == "test") {
    data::images::ImageReadOptions read;
    read.split = "t10k";
    read.num_classes = train_images().num_classes();
    return std::make_unique<data::images::ImageBatches>(data::images::read_images(s.data.path, read), batch_options(s, false));
  }
  auto split = data::images::holdout_split(train_images().size(), s.data.val_fraction, s.trainer.seed);
  return std::make_unique<data::images::ImageBatches>(train_images(), std::move(split.second), batch_options(s, false));
}

training::FitResult ImageRun::train(std::FILE* out) {
  const auto& s = task_->sections();
  std::unique_ptr<data::images::ImageBatches> train_rows;
  if (validation_kind(s.data) == "holdout") {
    auto split = data::images::holdout_split(train_images().size(), s.data.val_fraction, s.trainer.seed);
    train_rows = std::make_unique<data::images::ImageBatches>(train_images(), std::move(split.first), batch_options(s, true));
  } else {
    train_rows = std::make_unique<data::images::ImageBatches>(train_images(), batch_options(s, true));
  }
  std::unique_ptr<data::BatchSource> train_source = std::move(train_rows);
  if (s.data.prefetch > 0) {
    train_source = std::make_unique<data::Prefetcher>(std::move(train_source), s.trainer.process_rows(), static_cast<std::size_t>(s.data.prefetch));
  }
  auto val_rows = validation_batches();
  auto model = task_->build_model();
  auto objective = task_->objective(model);
  training::TrainerConfig trainer_config = s.trainer;
  if (trainer_config.flops_per_token == 0) trainer_config.flops_per_token = task_->flops_per_image();
  training::Trainer trainer(*objective, s.optim, trainer_config, dir());
  trainer.set_output(out);
  trainer.set_eval_callback([&](std::int64_t step) { task_->after_evaluation(*model, train_images(), dir(), step, out); });
  return trainer.fit(*train_source, val_rows.get());
}

std::shared_ptr<torch::nn::Module> ImageRun::load_model(bool live, std::optional<std::int64_t> step, const std::string& device,
                                                        fs::path* loaded) const {
  const auto& s = task_->sections();
  const c10::Device target = device.empty() ? nn::resolve_device(s.trainer.device) : nn::resolve_device(device, "--device");
  auto model = task_->build_model();
  fs::path used = training::load_checkpoint_weights(*model, checkpoint_to_load(dir(), step), /*use_ema=*/!live);
  if (loaded) *loaded = used;
  model->to(target);
  model->eval();
  return model;
}

objectives::Statistics ImageRun::evaluate(const EvalOptions& options, fs::path* loaded) {
  auto val = validation_batches();
  if (!val) {
    fail("run '", dir().string(), "' has no validation images (data.val = none); nothing to evaluate");
  }
  auto model = load_model(options.live, options.step, options.device, loaded);
  const auto where = model->parameters().front().device();
  auto objective = task_->objective(model);
  auto stats = training::evaluate_objective(*objective, *val, task_->sections().trainer.batch_size, options.max_batches, where);
  at::NoGradGuard no_grad;
  // `dew eval --json` names it val_loss beside the other figures (the and the spec's name).
  if (stats.has("loss")) stats.add("val_loss", stats.values().at("loss").sum, stats.values().at("loss").count);
  std::vector<std::string> notes;
  stats.merge(task_->evaluate_extra(*model, val->images(), options, &notes));
  for (const auto& note : notes) std::fprintf(stderr, "note: %s\n", note.c_str());
  return stats;
}

LoadedModel ImageRun::load_decoder(const ModelLoadOptions&) const {
  fail("run '", dir().string(), "' is a ", kind(), " run: it has no text decoder to generate or chat with",
       kind() == std::string("diffusion") ? "; draw images with `dew sample RUN --out grid.png`" : "");
}

SampleResult ImageRun::sample(const SampleRequest& request) const {
  if (auto answered = task_->sample(*this, request)) return *answered;
  return Run::sample(request);
}

ProbeResult ImageRun::probe(const ProbeRequest& request) const {
  if (auto answered = task_->probe(*this, request)) return *answered;
  return Run::probe(request);
}

}  // namespace dew::runs
