#pragma once
// `dew train jepa`: I-JEPA representation learning on images (objectives/jepa/jepa_objective.h) — a ViT
// context encoder and predictor against an EMA target encoder, on the image run life cycle (image_run.h).
// Labels, when the images have them, are not used for training (the probes will use them). A row of the
// run-kind table (run_kind.h).
#include <memory>

#include "dew/nn/vision/vision_transformer.h"
#include "dew/objectives/jepa/jepa_objective.h"
#include "dew/runs/image_task.h"
#include "dew/runs/run_kind.h"

namespace dew::runs {

struct JepaRunConfig : ImageSections {
  nn::vision::VisionTransformerConfig model;  // image_size and channels come from the data
  objectives::jepa::JepaObjectiveConfig jepa;

  JepaRunConfig() {
    model.patch_size = 4;  // 28x28 Fashion-MNIST: a 7x7 grid
    model.dim = 128;
    model.depth = 4;
    model.heads = 4;
    model.predictor_dim = 64;
    model.predictor_depth = 2;
    model.predictor_heads = 4;
    optim.learning_rate = 1e-3;
    optim.warmup_steps = 100;
    optim.weight_decay = 0.04;
    trainer.steps = 2000;
    trainer.batch_size = 64;
    trainer.eval_every = 500;
    trainer.eval_batches = 8;
    trainer.ema_decay = 0;  // the target encoder is the average that matters
  }

  template <class V>
  void fields(V& v) {
    visit(v, [&] {
      v("model", model);
      v("jepa", jepa);
    });
  }
};

std::unique_ptr<RunKind> make_jepa_kind();

}  // namespace dew::runs
