#pragma once
// `dew train jepa`: I-JEPA representation learning on images (objectives/jepa/jepa_objective.h) — a ViT
// context encoder and predictor against an EMA target encoder, on the image run life cycle (image_run.h).
// Labels, when the images have them, are not used for training (the probes will use them). A row of the
// run-kind table (run_kind.h).
#include <memory>
#include <optional>
#include <string>

#include "dew/nn/vision/vision_transformer.h"
#include "dew/objectives/jepa/jepa_objective.h"
#include "dew/runs/image_task.h"
#include "dew/runs/run_kind.h"

#include "dew/runs/kind_defaults.h"

namespace dew::runs {

// The "jepa" section: the objective's fields and the run's probing during training.
struct JepaSection : objectives::jepa::JepaObjectiveConfig {
  std::int64_t probe_every = 500;      // kNN probe at evaluations whose step is a multiple; 0 = never
  std::int64_t probe_images = 5000;    // training images the probe's neighbours come from
  std::int64_t probe_queries = 1000;   // further training images it classifies

  template <class V>
  void fields(V& v) {
    JepaObjectiveConfig::fields(v);
    v("probe_every", probe_every, "run the kNN probe at evaluations whose step is a multiple of this (0 = never); logs tracking/probe.jsonl and its plot");
    v("probe_images", probe_images, "probe during training: training images whose features are the neighbours");
    v("probe_queries", probe_queries, "probe during training: further training images it classifies (top-1 reported)");
  }
};

struct JepaRunConfig : ImageSections {
  nn::vision::VisionTransformerConfig model;  // image_size and channels come from the data
  JepaSection jepa;

  JepaRunConfig() { apply_kind_defaults(*this, "jepa"); }  // configs/kinds/jepa.json


  template <class V>
  void fields(V& v) {
    visit(v, [&] {
      v("model", model);
      v("jepa", jepa);
    });
  }
  void validate_settings() const {
    ImageSections::validate_settings();
    jepa.validate();
  }
};

std::unique_ptr<RunKind> make_jepa_kind();


}  // namespace dew::runs
