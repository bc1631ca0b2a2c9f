#include "dew/training/step_log.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "dew/core/error.h"
#include "dew/core/progress.h"

namespace dew::training {
namespace {

// The trainer's own scalars, in the order they are printed after the objective's.
// The rate is the objective's loss count per second (Objective::count_unit(): tokens, images), as
// "<unit>_per_second".
constexpr const char* kTrainerScalars[] = {"lr", "grad_norm", "step_seconds", "tokens_per_second", "images_per_second",
                                           "pairs_per_second", "mfu"};

bool is_trainer_scalar(const std::string& name) {
  return std::find(std::begin(kTrainerScalars), std::end(kTrainerScalars), name) != std::end(kTrainerScalars);
}

}  // namespace

std::string format_value(const std::string& name, double v) {
  char buf[64];
  if (name == "lr") {
    std::snprintf(buf, sizeof buf, "%.2e", v);
  } else if (name == "mfu") {
    std::snprintf(buf, sizeof buf, "%.1f%%", 100 * v);
  } else if (name == "step_seconds") {
    std::snprintf(buf, sizeof buf, "%.1f ms", 1000 * v);
  } else if (name == "tokens_per_second") {
    return human_count(v, "tok/s");
  } else if (name == "images_per_second") {
    return human_count(v, "img/s");
  } else if (name == "pairs_per_second") {
    return human_count(v, "pairs/s");
  } else {
    std::snprintf(buf, sizeof buf, "%.4g", v);
  }
  return buf;
}

std::string log_line(std::int64_t step, std::int64_t total, const std::map<std::string, double>& scalars) {
  std::string line = dew::str("step ", step, "/", total);
  auto add = [&](const std::string& name, double v) { line += dew::str("  ", name, " ", format_value(name, v)); };
  if (auto it = scalars.find("loss"); it != scalars.end()) add("loss", it->second);
  for (const auto& [name, v] : scalars) {
    if (name != "loss" && !is_trainer_scalar(name) && name.rfind("val/", 0) != 0) add(name, v);
  }
  for (const char* name : kTrainerScalars) {
    if (auto it = scalars.find(name); it != scalars.end()) add(name, it->second);
  }
  for (const auto& [name, v] : scalars) {
    if (name.rfind("val/", 0) == 0) add(name, v);
  }
  return line;
}


}  // namespace dew::training
