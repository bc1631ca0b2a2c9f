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
class ImageKind final : public TypedRunKind<Config> {
 public:
  using TypedRunKind<Config>::TypedRunKind;

  // Image runs start from random weights; there is no init section for --init-from to set.
  bool takes_init_from() const override { return false; }
  const char* data_help() const override {
    return "IDX images file or directory (the MNIST family, e.g. /usr/share/datasets/fashion-mnist), or a directory of "
           "PNG/JPEG images in one subdirectory per class";
  }

  std::unique_ptr<Run> start(const std::filesystem::path& run_dir, const config::Json& config) const override {
    return ImageRun::start(run_dir, std::make_unique<Task>(typed_config<Config>(config, "the config")));
  }

  std::unique_ptr<Run> open(const std::filesystem::path& run_dir, const RunFile& file) const override {
    return ImageRun::open(run_dir, file, std::make_unique<Task>(typed_config<Config>(file.config, run_file_path(run_dir).string())));
  }
};

}  // namespace dew::runs
