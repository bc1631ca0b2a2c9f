#include "dew/objectives/frechet_distance.h"

#include "dew/core/error.h"

namespace dew::objectives {
namespace {

// The symmetric PSD square root through eigh, negative eigenvalues (rounding) clamped to zero.
at::Tensor psd_sqrt(const at::Tensor& c) {
  auto [values, vectors] = at::linalg_eigh(c);
  return at::matmul(vectors * values.clamp_min(0).sqrt().unsqueeze(0), vectors.transpose(0, 1));
}

}  // namespace

FeatureGaussian feature_gaussian(const at::Tensor& features) {
  if (features.dim() != 2 || features.size(0) < 2) {
    fail("a Fréchet distance needs at least two feature vectors [N >= 2, D], got ", features.sizes());
  }
  const at::Tensor f = features.to(at::kCPU, at::kDouble);
  if (!at::isfinite(f).all().item<bool>()) fail("the features hold non-finite values; the images or the classifier are broken");
  FeatureGaussian g;
  g.count = f.size(0);
  g.mean = f.mean(0);
  const at::Tensor centred = f - g.mean;
  g.covariance = at::matmul(centred.transpose(0, 1), centred) / static_cast<double>(g.count - 1);
  return g;
}

double frechet_distance(const FeatureGaussian& a, const FeatureGaussian& b) {
  if (a.mean.sizes() != b.mean.sizes()) fail("Fréchet distance between features of different sizes: ", a.mean.sizes(), " and ", b.mean.sizes());
  const at::Tensor s = psd_sqrt(a.covariance);
  const at::Tensor m = at::matmul(at::matmul(s, b.covariance), s);
  const at::Tensor inner = 0.5 * (m + m.transpose(0, 1));  // symmetric up to rounding; eigh wants it exactly
  const double trace_sqrt = at::linalg_eigvalsh(inner).clamp_min(0).sqrt().sum().item<double>();
  const double mean_term = (a.mean - b.mean).pow(2).sum().item<double>();
  const double value = mean_term + a.covariance.trace().item<double>() + b.covariance.trace().item<double>() - 2 * trace_sqrt;
  return std::max(value, 0.0);
}

}  // namespace dew::objectives
