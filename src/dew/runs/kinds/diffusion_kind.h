#pragma once
// `dew train diffusion`: a class-conditional image diffusion model (DiT or UNet, nn/diffusion/) trained
// with a noise process and prediction target of objectives/diffusion/, previewed with a sample grid at each
// evaluation and drawn from with `dew sample`. A row of the run-kind table (run_kind.h).
//
// Defaults: a small DiT (patch 4, 128 features, 6 layers, 4 heads: 1.3 M parameters) with rectified flow
// on Fashion-MNIST's 28x28 images, batch 64, 2000 steps, EMA 0.999, AdamW 3e-4, guidance 2 with 32 Euler
// steps for previews and samples -- minutes on a CPU (README's "Image diffusion").
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "dew/inference/diffusion/sampler_config.h"
#include "dew/nn/diffusion/image_model.h"
#include "dew/objectives/diffusion/diffusion_objective.h"
#include "dew/runs/image_task.h"
#include "dew/runs/run_kind.h"

namespace dew::runs {

// The preview grid written at each evaluation: one row per class, `per_class` samples a row, drawn with the
// run's sample section from a fixed seed (the same noise every time, so grids compare across steps).
struct DiffusionPreviewConfig {
  std::int64_t per_class = 8;  // 0 = no preview
  std::uint64_t seed = 0;

  template <class V>
  void fields(V& v) {
    v("per_class", per_class, "preview samples per class at each evaluation (a row per class); 0 = none");
    v("seed", seed, "the preview's noise seed (the same noise at every evaluation)");
  }
};

struct DiffusionRunConfig : ImageSections {
  nn::diffusion::ImageModelConfig model;  // image_size, channels and num_classes come from the data
  objectives::diffusion::DiffusionObjectiveConfig diffusion;
  inference::diffusion::SamplerConfig sample;  // how previews, `dew sample` and `dew eval` draw
  DiffusionPreviewConfig preview;

  DiffusionRunConfig();

  template <class V>
  void fields(V& v) {
    visit(v, [&] {
      v("model", model);
      v("diffusion", diffusion);
      v("sample", sample);
      v("preview", preview);
    });
  }
  void validate_settings() const {
    ImageSections::validate_settings();
    diffusion.validate();
  }
};

std::unique_ptr<RunKind> make_diffusion_kind();

// `dew sample RUN`: a labelled grid (a row per label, per_label columns) and optionally one PNG per image.

}  // namespace dew::runs
