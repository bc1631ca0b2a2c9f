#include "dew/processes/masking_schedule.h"

#include <cmath>
#include <numbers>

#include "dew/core/error.h"

namespace dew::processes {

ScheduleKind parse_schedule(const std::string& name, const std::string& field) {
  if (name == "loglinear") return ScheduleKind::loglinear;
  if (name == "cosine") return ScheduleKind::cosine;
  fail(field, " is '", name, "'; use loglinear (MDLM's) or cosine");
}

at::Tensor MaskingSchedule::alpha(const at::Tensor& t) const {
  if (kind_ == ScheduleKind::loglinear) return 1 - (1 - eps_) * t;
  return 1 - at::cos((std::numbers::pi / 2) * (1 - t));
}

double MaskingSchedule::alpha(double t) const {
  if (kind_ == ScheduleKind::loglinear) return 1 - (1 - eps_) * t;
  return 1 - std::cos((std::numbers::pi / 2) * (1 - t));
}

at::Tensor MaskingSchedule::weight(const at::Tensor& t) const {
  at::Tensor w;
  if (kind_ == ScheduleKind::loglinear) {
    // (1 - eps) / ((1 - eps) t), written as 1 / t: the two differ by rounding only.
    w = 1 / t;
  } else {
    w = (std::numbers::pi / 2) * at::tan((std::numbers::pi / 2) * (1 - t));
  }
  return at::where(t > 0, w, at::zeros_like(w));
}

}  // namespace dew::processes
