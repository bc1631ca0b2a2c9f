#pragma once
// `dew train classifier`: an image classifier (nn/vision/image_classifier.h) trained with cross entropy on
// labelled images. Its use in dew: the Fashion-MNIST classifier whose features `dew eval` measures a
// diffusion run's samples in (assets/classifiers/, made by tools/make_fashion_classifier.sh). A row of the
// run-kind table (run_kind.h).
#include <memory>

#include "dew/nn/vision/image_classifier.h"
#include "dew/runs/image_task.h"
#include "dew/runs/run_kind.h"

#include "dew/runs/kind_defaults.h"

namespace dew::runs {

struct ClassifierRunConfig : ImageSections {
  nn::vision::ImageClassifierConfig model;  // image_size, channels and num_classes come from the data

  ClassifierRunConfig() { apply_kind_defaults(*this, "classifier"); }  // configs/kinds/classifier.json


  template <class V>
  void fields(V& v) {
    visit(v, [&] { v("model", model); });
  }
};

std::unique_ptr<RunKind> make_classifier_kind();

}  // namespace dew::runs
