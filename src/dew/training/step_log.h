#pragma once
// The trainer's log lines: "step 25/600  loss ...", then whatever the objective reports (its names,
// alphabetically), the trainer's own scalars, and the validation metrics. Nothing here knows which
// objective is training.
#include <cstdint>
#include <map>
#include <string>

namespace dew::training {

// One scalar as a log line shows it ("lr" as 3.00e-04, "mfu" as a percentage, rates with units).
std::string format_value(const std::string& name, double v);
std::string log_line(std::int64_t step, std::int64_t total, const std::map<std::string, double>& scalars);

}  // namespace dew::training
