#include "dew/objectives/diffusion/diffusion_objective.h"

#include "dew/core/stream_seed.h"

#include <ATen/CPUGeneratorImpl.h>

#include "dew/core/error.h"
#include "dew/objectives/diffusion/edm_preconditioning.h"

namespace dew::objectives::diffusion {

using processes::ProcessKind;
using processes::parse_prediction;
using processes::parse_process;
using processes::to_prediction;

namespace {

constexpr std::uint64_t kEvaluationStep = 0x6576616c75617465ULL;  // "evaluate": not a step a run reaches

}  // namespace

std::uint64_t noise_seed(std::uint64_t seed, std::int64_t step, std::int64_t micro) {
  constexpr std::uint64_t kPurpose = 0x646966666e6f6973ULL;  // "diffnois": a stream no other purpose draws
  return stream_seed(seed, kPurpose, step, micro);
}

Prediction DiffusionObjectiveConfig::resolved_prediction() const {
  if (prediction != "auto") return parse_prediction(prediction);
  switch (parse_process(process)) {
    case ProcessKind::vp: return Prediction::noise;
    case ProcessKind::edm: return Prediction::sample;
    case ProcessKind::flow: return Prediction::flow_velocity;
  }
  return Prediction::noise;
}

TimeSamplingConfig DiffusionObjectiveConfig::time_sampling_config() const {
  return {time_sampling, logit_mean, logit_std, p_mean, p_std};
}

void DiffusionObjectiveConfig::validate() const {
  NoiseProcessConfig::validate();
  const ProcessKind kind = parse_process(process);
  const Prediction p = resolved_prediction();
  if (p == Prediction::flow_velocity && kind != ProcessKind::flow) {
    fail("diffusion.prediction = flow (u = eps - x0) needs alpha + sigma = 1, i.e. diffusion.process = flow; for ",
         process, " use noise, sample or v");
  }
  if (kind == ProcessKind::edm && p != Prediction::sample) {
    fail("diffusion.process = edm trains the preconditioned denoiser, which predicts the sample; diffusion.prediction = ",
         prediction, " is not supported with it (use sample or auto)");
  }
  (void)parse_weighting(weighting);
  if (!(min_snr_gamma > 0)) fail("diffusion.min_snr_gamma = ", min_snr_gamma, " must be positive (5 is usual)");
  if (!(p2_k > 0)) fail("diffusion.p2_k = ", p2_k, " must be positive (1 is usual)");
  if (!(p2_gamma >= 0)) fail("diffusion.p2_gamma = ", p2_gamma, " must be >= 0 (1 is usual)");
  (void)resolve_time_sampling(time_sampling, kind);
  if (!(logit_std > 0)) fail("diffusion.logit_std = ", logit_std, " must be positive (1 is usual)");
  if (!(p_std > 0)) fail("diffusion.p_std = ", p_std, " must be positive (1.2 is usual)");
  if (!(label_dropout >= 0 && label_dropout <= 1)) {
    fail("diffusion.label_dropout = ", label_dropout, " must be a probability in [0, 1] (0.1 is usual; 0 = no dropout)");
  }
}

DiffusionObjective::DiffusionObjective(DiffusionModel model, DiffusionObjectiveConfig config, std::uint64_t seed)
    : model_(std::move(model)),
      config_((config.validate(), std::move(config))),
      process_(config_.process_config()),
      prediction_(config_.resolved_prediction()),
      weighting_(parse_weighting(config_.weighting)),
      time_sampling_(config_.time_sampling_config()),
      seed_(seed) {
  if (!model_.module) fail("DiffusionObjective needs a model module");
  if (!model_.forward) fail("DiffusionObjective needs the model's forward function");
  if (model_.num_classes < 0) fail("model.num_classes = ", model_.num_classes, " must be >= 0 (0 = unconditional)");
}

DiffusionObjective::Terms DiffusionObjective::terms(const at::Tensor& images, const at::Tensor& eps, const at::Tensor& t,
                                                    const at::Tensor& labels) {
  auto [alpha, sigma] = process_.alpha_sigma(t);
  const auto x_t = process_.add_noise(images, eps, t);
  const auto out = model_prediction(process_, prediction_, model_.forward, x_t, t, labels);
  const auto target = to_prediction(prediction_, images, eps, alpha.to(images.scalar_type()), sigma.to(images.scalar_type()));
  if (out.sizes() != target.sizes()) {
    fail("the diffusion model returned shape ", out.sizes(), " for images of shape ", images.sizes(),
         "; it must return the input's shape");
  }
  Terms r;
  r.alpha = alpha;
  r.sigma = sigma;
  r.squared_error = (out.to(at::kFloat) - target.to(at::kFloat)).square().flatten(1).mean(1);
  {
    at::NoGradGuard no_grad;
    switch (weighting_) {
      case Weighting::none:
        r.weight = process_.kind() == ProcessKind::edm ? edm_loss_weight(sigma, config_.sigma_data) : at::ones_like(sigma);
        break;
      case Weighting::min_snr: r.weight = min_snr_weight(prediction_, alpha, sigma, config_.min_snr_gamma); break;
      case Weighting::p2: r.weight = p2_weight(prediction_, alpha, sigma, config_.p2_k, config_.p2_gamma); break;
    }
    r.weight = r.weight.to(at::kFloat);
  }
  return r;
}

Loss DiffusionObjective::compute(const data::Batch& batch, std::uint64_t seed, bool drop_labels, bool quarters) {
  const at::Tensor& images = batch.get("images");
  if (images.dim() != 4 || !at::isFloatingType(images.scalar_type())) {
    fail("DiffusionObjective expects \"images\" as a float [B, C, H, W] batch, got ", images.scalar_type(), " of shape ", images.sizes());
  }
  const std::int64_t B = images.size(0);
  const std::int64_t none = model_.num_classes;  // the "no label" class
  at::Tensor labels;
  if (batch.has("labels") && model_.num_classes > 0) {
    labels = batch.get("labels").to(at::kCPU, at::kLong);
    if (labels.dim() != 1 || labels.size(0) != B) fail("\"labels\" must be [B] with B = ", B, ", got shape ", labels.sizes());
    if (B > 0) {
      const auto lo = labels.min().item<std::int64_t>(), hi = labels.max().item<std::int64_t>();
      if (lo < 0 || hi > none) {
        fail("label ", lo < 0 ? lo : hi, " in the batch is outside [0, ", none, "] (model.num_classes = ", none,
             "; ", none, " means no label); the data has more classes than the model");
      }
    }
  } else {
    labels = at::full({B}, none, at::kLong);  // unconditional model, or unlabelled data
  }

  // The draws, in the documented order, on the CPU (same numbers on any device).
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto t = sample_times(process_, time_sampling_, B, generator);
  const auto eps = at::randn(images.sizes(), generator, at::TensorOptions().dtype(at::kFloat));
  if (drop_labels && config_.label_dropout > 0) {
    const auto drop = at::rand({B}, generator, at::TensorOptions().dtype(at::kFloat)) < config_.label_dropout;
    labels = at::where(drop, at::full_like(labels, none), labels);
  }

  const auto device = images.device();
  const Terms r = terms(images, eps.to(device, images.scalar_type()), t.to(device), labels.to(device));
  const auto per_example = r.squared_error * r.weight;
  Loss out;
  out.sum = per_example.sum();
  out.count = static_cast<double>(B);
  const auto values = per_example.detach().to(at::kCPU, at::kDouble);
  out.metrics.add("loss", values.sum().item<double>(), out.count);
  if (quarters && B > 0) {
    // The noise fraction sigma^2 / (alpha^2 + sigma^2) = 1 / (1 + snr): in [0, 1] for every process.
    const auto a = r.alpha.to(at::kCPU, at::kDouble), s = r.sigma.to(at::kCPU, at::kDouble);
    const auto fraction = (s * s) / (a * a + s * s);
    const auto quarter = (fraction * 4).floor().clamp(0, 3).to(at::kLong);
    for (std::int64_t q = 0; q < 4; ++q) {
      const auto in = quarter == q;
      const auto n = in.sum().item<std::int64_t>();
      if (n > 0) out.metrics.add(str("loss_q", q + 1), values.masked_select(in).sum().item<double>(), static_cast<double>(n));
    }
  }
  return out;
}

Loss DiffusionObjective::loss(const data::Batch& batch, std::int64_t step) {
  return compute(batch, noise_seed(seed_, step, micro_.next_stream_key(step)), /*drop_labels=*/true, /*quarters=*/false);
}

Statistics DiffusionObjective::evaluate(const data::Batch& batch) {
  at::NoGradGuard no_grad;
  return compute(batch, noise_seed(seed_, static_cast<std::int64_t>(kEvaluationStep), 0), /*drop_labels=*/false,
                 /*quarters=*/true)
      .metrics;
}

nlohmann::ordered_json DiffusionObjective::config_json() const {
  nlohmann::ordered_json out;
  out["name"] = name();
  out["diffusion"] = config::to_json(config_);
  out["model"] = model_.config;
  return out;
}

}  // namespace dew::objectives::diffusion
