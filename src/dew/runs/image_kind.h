#pragma once
// A row of the run-kind table for an image kind: its typed Config (ImageSections plus the kind's model and
// objective sections, with a fields() list) and its Task (an ImageTask built from a Config). Everything else
// is the shared image-run life cycle (image_run.h).
#include <memory>
#include <string>

#include "dew/runs/image_run.h"
#include "dew/runs/run_kind.h"

namespace dew::runs {

template <class Config, class Task>
class ImageKind final : public RunKind {
 public:
  ImageKind(const char* name, const char* summary, std::vector<KindFlag> flags = {})
      : name_(name), summary_(summary), flags_(std::move(flags)) {}

  const char* name() const override { return name_; }
  const char* summary() const override { return summary_; }
  const char* data_help() const override {
    return "IDX images file or directory (the MNIST family, e.g. /usr/share/datasets/fashion-mnist), or a directory of "
           "PNG/JPEG images in one subdirectory per class";
  }
  std::vector<KindFlag> flags() const override { return flags_; }
  std::string config_help() const override { return config::describe<Config>(); }

  config::Json load_config(const config::Json& stored, const std::optional<std::filesystem::path>& file,
                           const std::vector<std::string>& overrides) const override {
    Config base;
    if (!stored.is_null()) config::from_json(stored, base, "run.json");
    return config::to_json(config::load<Config>(file, overrides, std::move(base)));
  }

  std::unique_ptr<Run> start(const std::filesystem::path& run_dir, const config::Json& config) const override {
    Config typed;
    config::from_json(config, typed, "the config");
    return ImageRun::start(run_dir, std::make_unique<Task>(std::move(typed)));
  }

  std::unique_ptr<Run> open(const std::filesystem::path& run_dir, const RunFile& file) const override {
    Config typed;
    config::from_json(file.config, typed, run_file_path(run_dir).string());
    return ImageRun::open(run_dir, file, std::make_unique<Task>(std::move(typed)));
  }

 private:
  const char *name_, *summary_;
  std::vector<KindFlag> flags_;
};

}  // namespace dew::runs
