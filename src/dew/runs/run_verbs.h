#pragma once
// The optional verbs of a run: what some kinds can do beyond train, evaluate and load (run.h). A kind that
// can answers through its Run; the others refuse, naming their kind and the command. A new verb is a
// request here, a virtual on Run, and an override in the kinds that answer it: the commands never cast.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dew/nn/causal_transformer.h"
#include "dew/nn/lora.h"

namespace dew::runs {

// `dew sample` (diffusion runs): images drawn into a labelled grid PNG.
struct SampleRequest {
  std::filesystem::path grid;                        // the grid PNG
  std::optional<std::filesystem::path> images_dir;   // also one PNG per sample here
  std::vector<std::int64_t> labels;                  // empty = every class (an unconditional model: one row)
  std::int64_t per_label = 8;
  std::uint64_t seed = 0;
  // Overrides of the run's sample section.
  std::optional<std::string> solver, spacing;
  std::optional<std::int64_t> steps;
  std::optional<double> cfg_scale, eta;
  // Which weights.
  bool live = false;
  std::optional<std::int64_t> step;
  std::string device;
};
struct SampleResult {
  std::filesystem::path checkpoint;
  std::int64_t images = 0;
  std::string sampler;  // "euler, 32 steps, guidance 2"
};

// `dew probe`: the encoder's mean-pooled features of the train split's images train a probe that is scored
// on the test split; the same probe on a freshly initialised encoder (the run's own initialisation) and on
// the raw pixels gives the baselines every report shows.
struct ProbeRequest {
  std::string method = "knn";  // knn | linear
  std::string encoder = "context";  // context (default: on short runs the slow EMA target lags it) | target (what I-JEPA evaluates)
  std::string data;            // IDX directory with train and t10k splits; empty = the run's data.path
  std::int64_t k = 20;
  double temperature = 0.07;
  std::int64_t linear_steps = 300;
  std::int64_t max_train = 0;  // 0 = every training image; else the first N (faster probes)
  std::optional<std::int64_t> step;
  std::string device;
};

struct ProbeResult {
  std::string method, encoder, checkpoint;
  double top1 = 0, random_init_top1 = 0, pixels_top1 = 0;
  std::int64_t train_images = 0, test_images = 0;
  std::string test_split;  // "t10k", or the holdout drawn from the training images when the data has no test split
};

// `dew export --format peft` (decoder runs trained with LoRA): the adapters apart from their base, with what
// peft's adapter_config.json records. The request is the checkpoint to read (ModelLoadOptions' live and step).
struct LoraAdapters {
  nn::CausalTransformer model{nullptr};  // the base with the adapters unmerged, on the CPU, in eval mode
  nn::LoraConfig lora;
  std::string base;                      // init.from: the model the adapters sit on
  std::string model_type;                // init.from's family: the module names the adapter directory uses
  std::filesystem::path checkpoint;      // the step directory read
};

}  // namespace dew::runs
