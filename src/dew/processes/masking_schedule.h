#pragma once
// How fast masked diffusion hides tokens: alpha(t) in (0, 1] is the fraction of a row still visible at time
// t in [0, 1], alpha(0) = 1. The MDLM paper's continuous-time negative ELBO weighs the cross entropy at a
// masked position by -alpha'(t) / (1 - alpha(t)).
//
//   loglinear  alpha(t) = 1 - (1 - eps) t                  weight 1 / t   (MDLM's default; -log alpha is
//                                                                         linear in log space)
//   cosine     alpha(t) = 1 - cos(pi/2 (1 - t))            weight pi/2 tan(pi/2 (1 - t))   (MD4's)
#include <ATen/ATen.h>

#include <string>

namespace dew::processes {

enum class ScheduleKind { loglinear, cosine };

// "loglinear" or "cosine"; anything else is refused naming `field`.
ScheduleKind parse_schedule(const std::string& name, const std::string& field);

class MaskingSchedule {
 public:
  MaskingSchedule(ScheduleKind kind, double eps) : kind_(kind), eps_(eps) {}
  // Elementwise over t (float32 or float64 tensors) and for one double.
  at::Tensor alpha(const at::Tensor& t) const;
  double alpha(double t) const;
  // -alpha'(t) / (1 - alpha(t)); 0 where t = 0 (nothing is masked there, so nothing is weighed).
  at::Tensor weight(const at::Tensor& t) const;

 private:
  ScheduleKind kind_;
  double eps_;
};

}  // namespace dew::processes
