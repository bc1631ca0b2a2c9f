#include "dew/objectives/diffusion/model_prediction.h"

#include "dew/core/error.h"
#include "dew/objectives/diffusion/edm_preconditioning.h"

namespace dew::objectives::diffusion {

using processes::ProcessKind;
using processes::broadcast_over;

at::Tensor model_prediction(const NoiseProcess& process, Prediction prediction, const ImageModelFn& model,
                            const at::Tensor& x_t, const at::Tensor& t, const at::Tensor& labels) {
  if (process.kind() != ProcessKind::edm) return model(x_t, process.model_time(t), labels);
  if (prediction != Prediction::sample) {
    fail("diffusion.process = edm trains the preconditioned denoiser, which predicts the sample; diffusion.prediction = ",
         to_string(prediction), " is not supported with it (use sample)");
  }
  const auto s = t.to(x_t.scalar_type());
  const auto c = edm_scalings(s, process.config().sigma_data);
  const auto rank = x_t.dim();
  const auto f = model(broadcast_over(c.c_in, rank) * x_t, c.c_noise.to(at::kFloat), labels);
  return broadcast_over(c.c_skip, rank) * x_t + broadcast_over(c.c_out, rank) * f;
}

Denoised model_denoised(const NoiseProcess& process, Prediction prediction, const ImageModelFn& model,
                        const at::Tensor& x_t, const at::Tensor& t, const at::Tensor& labels) {
  const auto [alpha, sigma] = process.alpha_sigma(t);
  return from_prediction(prediction, model_prediction(process, prediction, model, x_t, t, labels), x_t, alpha, sigma);
}

}  // namespace dew::objectives::diffusion
