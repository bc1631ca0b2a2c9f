#pragma once
// Image diffusion as an Objective: noise a batch of images at times drawn per example, run the network
// (model_prediction.h) and score its prediction against the true target with a per-example weight.
//
// Each micro-batch draws, from a CPU generator seeded by noise_seed(trainer seed, step, micro-batch), in
// this order: the times [B] (time_sampling.h), the noise eps [B, C, H, W], and (when label_dropout > 0) one
// uniform [B] for label dropout. A resumed run therefore draws what the uninterrupted run drew, on any
// device, with no generator state in the checkpoint. evaluate() draws the same way from one fixed seed
// (every evaluation batch the same stream, no dropout), so validation losses are comparable across
// evaluations.
//
// Loss: per example, the mean over pixels of (prediction - target)^2 times the weighting's weight
// (loss_weighting.h); Loss.sum adds them, Loss.count = B. EDM (a decision): process = edm always trains
// Karras et al.'s preconditioned denoiser D with prediction = sample, and weighting = none is EDM's own
// lambda(sigma) on (D - x0)^2, which equals the plain error of the network against its preconditioned
// target; min_snr and p2 replace lambda with their weights on the x0 error.
//
// The model enters as a DiffusionModel (a module, its forward, its init, its class count), so this layer
// needs no model header; diffusion_model(std::shared_ptr<M>) builds one from any image model class with
// forward(x, time, labels), init_parameters(seed) and config() (whose num_classes is the label count).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "dew/core/config.h"
#include "dew/objectives/diffusion/loss_weighting.h"
#include "dew/objectives/diffusion/model_prediction.h"
#include "dew/processes/noise_process.h"
#include "dew/objectives/diffusion/time_sampling.h"
#include "dew/objectives/micro_batch_index.h"
#include "dew/objectives/objective.h"

namespace dew::objectives::diffusion {

// The processes this objective trains against live below objectives and inference (processes/).
using processes::NoiseProcess;
using processes::NoiseProcessConfig;
using processes::Prediction;

// The "diffusion" section of a diffusion run: the noise process's fields and the objective's own.
struct DiffusionObjectiveConfig : NoiseProcessConfig {
  std::string prediction = "auto";  // auto (vp noise, flow flow, edm sample) | noise | sample | v | flow
  std::string weighting = "none";   // none (the schedule's; EDM's lambda for edm) | min_snr | p2
  double min_snr_gamma = 5.0;
  double p2_k = 1.0, p2_gamma = 1.0;
  std::string time_sampling = "auto";  // auto (vp uniform, flow logit_normal, edm lognormal) | uniform | logit_normal | lognormal
  double logit_mean = 0.0, logit_std = 1.0;  // logit_normal (SD3's defaults)
  double p_mean = -1.2, p_std = 1.2;         // lognormal: EDM's P_mean, P_std
  double label_dropout = 0.1;                // probability a training label becomes "no label" (for CFG)

  template <class V>
  void fields(V& v) {
    NoiseProcessConfig::fields(v);
    v("prediction", prediction, "what the network predicts: auto (vp noise, flow flow, edm sample), noise, sample, v or flow");
    v("weighting", weighting, "loss weighting: none (the schedule's; EDM's lambda for edm), min_snr or p2");
    v("min_snr_gamma", min_snr_gamma, "min_snr: the SNR cap gamma (Hang et al. 2023)");
    v("p2_k", p2_k, "p2: k in 1/(k + snr)^gamma (Choi et al. 2022)");
    v("p2_gamma", p2_gamma, "p2: gamma in 1/(k + snr)^gamma");
    v("time_sampling", time_sampling, "training times: auto (vp uniform, flow logit_normal, edm lognormal), uniform, logit_normal or lognormal");
    v("logit_mean", logit_mean, "logit_normal: mean of the normal before the sigmoid");
    v("logit_std", logit_std, "logit_normal: standard deviation of the normal before the sigmoid");
    v("p_mean", p_mean, "lognormal (edm): mean of ln sigma (EDM's P_mean)");
    v("p_std", p_std, "lognormal (edm): standard deviation of ln sigma (EDM's P_std)");
    v("label_dropout", label_dropout, "probability that a training label is replaced by the 'no label' class (classifier-free guidance)");
  }

  // NoiseProcessConfig::validate and every field here, refused by diffusion.<field> and value.
  void validate() const;
  const NoiseProcessConfig& process_config() const { return *this; }
  Prediction resolved_prediction() const;  // "auto" resolved for the process
  TimeSamplingConfig time_sampling_config() const;
};

// What the objective needs of a network.
struct DiffusionModel {
  std::shared_ptr<torch::nn::Module> module;  // the trained (checkpointed, EMA-averaged) parameters
  ImageModelFn forward;
  std::function<void(std::uint64_t)> init;    // fresh parameters from a seed
  std::int64_t num_classes = 0;               // 0 = unconditional; labels in [0, num_classes]
  nlohmann::ordered_json config;              // recorded as config_json()["model"]
};

template <class M>
DiffusionModel diffusion_model(std::shared_ptr<M> model) {
  DiffusionModel out;
  out.module = model;
  out.forward = [model](const at::Tensor& x, const at::Tensor& time, const at::Tensor& labels) { return model->forward(x, time, labels); };
  out.init = [model](std::uint64_t seed) { model->init_parameters(seed); };
  out.num_classes = model->config().num_classes;
  out.config = config::to_json(model->config());
  return out;
}

// The generator seed of micro-batch `micro` of step `step` (SplitMix64 over the three and a purpose tag).
std::uint64_t noise_seed(std::uint64_t seed, std::int64_t step, std::int64_t micro);

class DiffusionObjective final : public Objective {
 public:
  // `seed` is trainer.seed: the noise streams derive from it.
  DiffusionObjective(DiffusionModel model, DiffusionObjectiveConfig config, std::uint64_t seed);

  std::string name() const override { return "diffusion"; }
  std::string count_unit() const override { return "images"; }
  void init(std::uint64_t seed) override { model_.init(seed); }
  torch::nn::Module& module() override { return *model_.module; }
  // batch: "images" float [B, C, H, W] (in [-1, 1]), optional "labels" int64 [B] (absent = no label).
  // Metrics: "loss" (the weighted per-example loss, count B).
  Loss loss(const data::Batch& batch, std::int64_t step) override;
  // "loss" as in training (no label dropout, the fixed evaluation stream), and "loss_q1".."loss_q4": the
  // same over the examples whose noise fraction sigma^2/(alpha^2+sigma^2) lies in the first..fourth quarter
  // of [0, 1] (q1 least noisy; a quarter no example fell in is absent).
  Statistics evaluate(const data::Batch& batch) override;
  nlohmann::ordered_json config_json() const override;

  const NoiseProcess& process() const { return process_; }
  Prediction prediction() const { return prediction_; }
  const DiffusionObjectiveConfig& config() const { return config_; }
  const DiffusionModel& model() const { return model_; }

  // The per-example loss (before weighting) and the weights, for a batch with given noise, times and
  // labels: what loss() computes after its draws. Exposed for tests and tools. images, eps [B, C, H, W];
  // t, labels [B], all on one device.
  struct Terms {
    at::Tensor squared_error;  // [B], mean over each example's elements, differentiable
    at::Tensor weight;         // [B], no gradient
    at::Tensor alpha, sigma;   // [B]
  };
  Terms terms(const at::Tensor& images, const at::Tensor& eps, const at::Tensor& t, const at::Tensor& labels);

 private:
  Loss compute(const data::Batch& batch, std::uint64_t seed, bool drop_labels, bool quarters);

  DiffusionModel model_;
  DiffusionObjectiveConfig config_;
  NoiseProcess process_;
  Prediction prediction_;
  Weighting weighting_;
  TimeSamplingConfig time_sampling_;
  std::uint64_t seed_;
  MicroBatchIndex micro_;
};

}  // namespace dew::objectives::diffusion
