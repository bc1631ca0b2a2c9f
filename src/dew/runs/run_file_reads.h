#pragma once
// How many times this process has read a run.json (run_directory.h's read_run_file). Tests count the reads
// around a command to show that it resolves MODEL and init.from once (model_source.h) rather than going
// back to the path at every step.
#include <cstdint>

namespace dew::runs {

std::int64_t run_file_reads();

}  // namespace dew::runs
