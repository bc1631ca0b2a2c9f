#pragma once
// The config sections every image run kind shares (diffusion, classifier): which images, how they are
// split and augmented, the optimizer and the trainer. A kind's config derives from this and adds its model
// and objective sections (kinds/*.h).
#include <cstdint>
#include <string>

#include "dew/training/optim_config.h"
#include "dew/training/trainer_config.h"

namespace dew::runs {

struct ImageDataConfig {
  std::string path;                // IDX file, IDX directory or image directory (--data sets it)
  std::string val = "auto";        // auto | test | holdout | none
  double val_fraction = 0.05;      // holdout: the share of the training images held out
  std::int64_t image_size = 0;     // 0 = as stored; else resized (or padded) to image_size x image_size
  std::string fit = "resize";      // resize | pad
  bool flip = false;               // random horizontal flips (not for digits or text)
  // Training batches prepared ahead on a background thread; 0 = none. Off by default: a batch takes ~0.1 ms
  // to assemble, and on a CPU-only run the extra thread makes libgomp park its workers between parallel
  // regions (a DiT step has hundreds): measured 166 -> 235 ms a step on 2 cores. Worth it when the step runs
  // on a GPU and the CPU is otherwise idle.
  std::int64_t prefetch = 0;

  template <class V>
  void fields(V& v) {
    v("path", path, "IDX file or directory (MNIST family), or a directory of PNG/JPEG images (--data sets it)");
    v("val", val, "validation images: auto (the test split of an IDX directory, else holdout), test, holdout or none");
    v("val_fraction", val_fraction, "holdout: the share of training images held out for validation");
    v("image_size", image_size, "0 = as stored; else fit every image to image_size x image_size");
    v("fit", fit, "how images reach image_size: resize (bilinear) or pad (centred, with black)");
    v("flip", flip, "random horizontal flips of training images");
    v("prefetch", prefetch, "training batches prepared ahead on a background thread; 0 = none (the default: on a CPU the thread slows the step's own threads; use it with a GPU)");
  }
  void validate() const;
};

struct ImageSections {
  ImageDataConfig data;
  training::OptimConfig optim;
  training::TrainerConfig trainer;

  // A kind's fields(): data first, the kind's own sections, then optim and trainer.
  template <class V, class Own>
  void visit(V& v, Own own) {
    v("data", data);
    own();
    v("optim", optim);
    v("trainer", trainer);
  }

  // The settings that can be checked without the images (`--print-config` refuses what training would).
  void validate_settings() const {
    optim.validate();
    trainer.validate();
  }
};

}  // namespace dew::runs
