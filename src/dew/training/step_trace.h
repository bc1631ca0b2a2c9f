#pragma once
// `trainer.trace_step`: one training step run under LibTorch's profiler, its ops written as a Chrome trace
// (chrome://tracing, Perfetto; tools/bench/trace_ops.py sums self time per op). The way to see where a
// step of one's own run goes, at the sizes and data of that run.
#include <cstdint>
#include <filesystem>
#include <functional>

namespace dew::training {

// RUN/trace/step-N.json, or step-N.rank-R.json for a process of a multi-process job.
std::filesystem::path step_trace_path(const std::filesystem::path& run_dir, std::int64_t step, std::int64_t rank, std::int64_t world);

// Runs `body` under the profiler and writes the trace to `path` through a temporary sibling renamed into
// place, so a killed run leaves no half-written trace.
void run_traced(const std::filesystem::path& path, const std::function<void()>& body);

}  // namespace dew::training
