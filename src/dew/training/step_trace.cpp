#include "dew/training/step_trace.h"

#include <torch/csrc/autograd/profiler_legacy.h>

#include <unistd.h>

#include "dew/core/error.h"

namespace fs = std::filesystem;

namespace dew::training {

fs::path step_trace_path(const fs::path& run_dir, std::int64_t step, std::int64_t rank, std::int64_t world) {
  const std::string name = world > 1 ? dew::str("step-", step, ".rank-", rank, ".json") : dew::str("step-", step, ".json");
  return run_dir / "trace" / name;
}

void run_traced(const fs::path& path, const std::function<void()>& body) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) fail("cannot create '", path.parent_path().string(), "' for trainer.trace_step's trace: ", ec.message());
  const fs::path temporary = dew::str(path.string(), ".tmp-", ::getpid());
  {
    // The legacy profiler: it needs no Kineto, which the CPU wheel's LibTorch may lack. It writes the
    // Chrome trace when it goes out of scope.
    torch::autograd::profiler::RecordProfile profile(temporary.string());
    body();
  }
  fs::rename(temporary, path, ec);
  if (ec) {
    fs::remove(temporary, ec);
    fail("cannot move trainer.trace_step's trace into place at '", path.string(), "'");
  }
}

}  // namespace dew::training
