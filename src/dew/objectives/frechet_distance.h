#pragma once
// The Fréchet distance between two sets of feature vectors, each summarised as a Gaussian (mean and
// covariance): |mu_a - mu_b|^2 + tr(C_a + C_b - 2 (C_a C_b)^(1/2)). With Inception-v3 pool features this
// is FID; dew uses its own Fashion-MNIST classifier's features (nn/vision/image_classifier.h), so its
// values are comparable with each other only, not with published FIDs.
#include <ATen/ATen.h>

namespace dew::objectives {

struct FeatureGaussian {
  at::Tensor mean;        // float64 [D]
  at::Tensor covariance;  // float64 [D, D], unbiased (N - 1)
  std::int64_t count = 0;
};

// features: [N, D], N >= 2. Refused (dew::Error) when there are fewer than two rows or non-finite values.
FeatureGaussian feature_gaussian(const at::Tensor& features);

// tr((C_a C_b)^(1/2)) is computed as the sum of square roots of the eigenvalues of the symmetric
// S C_b S with S = C_a^(1/2) (both from symmetric eigendecompositions, in float64), which equals it
// exactly in exact arithmetic and avoids the non-symmetric matrix square root. Eigenvalues below zero
// (rounding) count as zero.
double frechet_distance(const FeatureGaussian& a, const FeatureGaussian& b);

}  // namespace dew::objectives
