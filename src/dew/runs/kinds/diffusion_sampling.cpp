#include "dew/runs/kinds/diffusion_sampling.h"

#include "dew/core/error.h"
#include "dew/inference/diffusion/guidance.h"
#include "dew/inference/diffusion/solver.h"
#include "dew/objectives/diffusion/edm_preconditioning.h"

namespace dew::runs {

namespace {

namespace diff = objectives::diffusion;
namespace inf = inference::diffusion;

// The network as the sampler sees it: (x_t, model time, labels) -> the trained prediction. EDM trains a
// preconditioned denoiser, D = c_skip x + c_out F(c_in x, c_noise), so the wrapper applies the scalings
// around F (edm's model time is c_noise = ln(sigma) / 4, which gives sigma back).
inf::ConditionalModel conditional_model(const processes::NoiseProcess& process, std::shared_ptr<nn::diffusion::ImageModelImpl> model) {
  if (process.kind() != processes::ProcessKind::edm) {
    return [model](const at::Tensor& x, const at::Tensor& time, const at::Tensor& labels) { return model->forward(x, time, labels); };
  }
  const double sigma_data = process.config().sigma_data;
  return [model, sigma_data](const at::Tensor& x, const at::Tensor& time, const at::Tensor& labels) {
    const at::Tensor sigma = at::exp(4 * time.to(at::kFloat)).view({-1, 1, 1, 1});
    const diff::EdmScalings s = diff::edm_scalings(sigma, sigma_data);
    return s.c_skip * x + s.c_out * model->forward(s.c_in * x, time, labels);
  };
}

}  // namespace

std::vector<std::int64_t> labels_by_class(std::int64_t num_classes, std::int64_t per_class) {
  std::vector<std::int64_t> labels;
  for (std::int64_t c = 0; c < num_classes; ++c) labels.insert(labels.end(), static_cast<std::size_t>(per_class), c);
  return labels;
}

at::Tensor draw_images(const std::shared_ptr<nn::diffusion::ImageModelImpl>& model,
                       const diff::DiffusionObjectiveConfig& diffusion, const ImageDrawRequest& request) {
  const auto& m = model->config();
  const processes::NoiseProcess process(diffusion.process_config());
  request.sampler.validate(process.kind());
  const auto device = model->parameters().front().device();
  const std::int64_t batch = std::max<std::int64_t>(1, request.batch);
  auto generator = at::make_generator<at::CPUGeneratorImpl>(request.seed);
  std::vector<at::Tensor> out;
  at::NoGradGuard no_grad;
  for (std::size_t start = 0; start < request.labels.size(); start += static_cast<std::size_t>(batch)) {
    const auto n = std::min<std::size_t>(static_cast<std::size_t>(batch), request.labels.size() - start);
    std::vector<std::int64_t> part(request.labels.begin() + static_cast<std::ptrdiff_t>(start),
                                   request.labels.begin() + static_cast<std::ptrdiff_t>(start + n));
    for (auto l : part) {
      if (l < 0 || l > m.num_classes) fail("label ", l, " is outside the model's classes [0, ", m.num_classes, "] (", m.num_classes, " = unconditional)");
    }
    const at::Tensor labels = at::tensor(part, at::kLong).to(device);
    const at::Tensor x_T = inf::initial_noise(process, {static_cast<std::int64_t>(n), m.channels, m.image_size, m.image_size}, generator, device);
    const inf::Denoiser denoiser = inf::guided_denoiser(process, diffusion.resolved_prediction(), conditional_model(process, model),
                                                        labels, m.num_classes, request.sampler.guidance);
    out.push_back(inf::sample(process, request.sampler, denoiser, x_T, generator).clamp(-1, 1).to(at::kCPU, at::kFloat));
  }
  if (out.empty()) return at::empty({0, m.channels, m.image_size, m.image_size});
  return at::cat(out);
}

}  // namespace dew::runs
