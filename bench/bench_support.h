#pragma once
// What every benchmark binary measures the same way: medians, this process's memory, the matmul peak, the
// trainer's step times, and its JSON line.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "dew/data/batch_source.h"
#include "dew/objectives/objective.h"
#include "dew/training/flops.h"
#include "dew/training/trainer.h"

namespace dew::bench {

// The median (the mean of the middle two for an even count); 0 for none. Benchmarks quote medians: the
// machines are shared, and one slow outlier should not move the figure.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Resident memory now, in MiB (/proc/self/statm): the baseline before a benchmark allocates.
inline double current_rss_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

// The process's peak resident memory so far, in MiB.
inline double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

// The kernel benchmarks' flags, `--threads N` and `--reps N`, into `threads` and `reps`, and, where `only` is
// given, `--only SUBSTRING` (run the cases whose name has it); false (with a message) for any other flag.
inline bool parse_threads_and_reps(int argc, char** argv, int& threads, int& reps, std::string* only = nullptr) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads") {
      threads = std::atoi(argv[i + 1]);
    } else if (flag == "--reps") {
      reps = std::atoi(argv[i + 1]);
    } else if (flag == "--only" && only != nullptr) {
      *only = argv[i + 1];
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return false;
    }
  }
  return true;
}

// A few batches drawn once and cycled through, so that producing a batch costs nothing in a measured step.
class CycledBatches final : public data::BatchSource {
 public:
  explicit CycledBatches(std::vector<data::Batch> pool, std::int64_t rows) : pool_(std::move(pool)), rows_(rows) {}
  data::Batch next_batch(std::int64_t rows) override {
    if (rows != rows_) throw std::runtime_error("the benchmark's batches hold " + std::to_string(rows_) + " rows, asked for " + std::to_string(rows));
    return pool_[static_cast<std::size_t>(position_++ % static_cast<std::int64_t>(pool_.size()))];
  }
  std::int64_t position() const override { return position_; }
  void set_position(std::int64_t position) override { position_ = position; }
  std::int64_t records() const override { return std::int64_t{1} << 30; }

 private:
  std::vector<data::Batch> pool_;
  std::int64_t rows_, position_ = 0;
};

// AdamW with gradient clipping at 1, as the benchmarks' peers configure theirs.
inline training::OptimConfig adamw(double learning_rate, double beta2, double weight_decay, const std::string& schedule) {
  training::OptimConfig optim;
  optim.name = "adamw";
  optim.learning_rate = learning_rate;
  optim.beta1 = 0.9;
  optim.beta2 = beta2;
  optim.weight_decay = weight_decay;
  optim.grad_clip_norm = 1.0;
  optim.schedule = schedule;
  return optim;
}

// The matmul peak MFU divides by: the best of three measurements, since on a shared machine another
// process can only lower one, never raise it.
inline double best_peak_flops(c10::Device device, c10::ScalarType dtype) {
  double peak = 0;
  for (int i = 0; i < 3; ++i) peak = std::max(peak, training::measure_peak_flops(device, dtype));
  return peak;
}

// The trainer settings of a timing run of `steps` steps: one log line after the last step, no evaluation and
// only the final checkpoint (after the last measured step); the rest at their defaults for the caller to set.
inline training::TrainerConfig timing_trainer_config(std::int64_t steps, std::int64_t batch, std::uint64_t seed) {
  training::TrainerConfig trainer;
  trainer.steps = steps;
  trainer.batch_size = batch;
  trainer.log_every = steps;
  trainer.eval_every = 0;
  trainer.checkpoint_every = 0;
  trainer.keep_checkpoints = 1;
  trainer.seed = seed;
  return trainer;
}

// A benchmark binary's main: `body` parses the flags and fills the JSON object (after "impl"), which is
// printed as one line with the intra-op thread count and the process's peak and starting RSS. An exception
// (a bad flag included) is printed as "NAME: message" with exit status 1.
template <class Body>
int run_bench(const char* name, Body body) {
  try {
    const double base_rss = current_rss_mib();
    nlohmann::ordered_json out;
    out["impl"] = "dew";
    body(out);
    out["threads"] = at::get_num_threads();
    out["peak_rss_mib"] = peak_rss_mib();
    out["base_rss_mib"] = base_rss;
    std::printf("%s\n", out.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

// What a Trainer run measured: the seconds between consecutive step callbacks after the warmup steps (the
// whole training step), and every step's loss.
struct TrainerTimes {
  std::vector<double> step_seconds, losses;
  std::int64_t state_bytes = 0;  // Trainer::resident_state_bytes(): this process's weights, optimizer state, EMA
};

// Runs trainer.steps steps of the Trainer on `source` in a temporary run directory (removed after), quietly,
// timing each step from the previous step's callback; step 1's interval includes fit()'s set-up, so warmup
// must be >= 1.
inline TrainerTimes time_trainer(objectives::Objective& objective, const training::OptimConfig& optim,
                                 const training::TrainerConfig& trainer, data::BatchSource& source, std::int64_t warmup) {
  using Clock = std::chrono::steady_clock;
  char dir_template[] = "/tmp/dew-bench-run-XXXXXX";
  if (!mkdtemp(dir_template)) throw std::runtime_error("cannot create a temporary run directory");
  const std::filesystem::path run_dir = dir_template;
  TrainerTimes times;
  auto last = Clock::now();
  {
    training::Trainer t(objective, optim, trainer, run_dir);
    t.set_output(nullptr);
    t.set_step_callback([&](std::int64_t step, const std::map<std::string, double>& scalars) {
      const double dt = std::chrono::duration<double>(Clock::now() - last).count();
      last = Clock::now();
      if (step > warmup) times.step_seconds.push_back(dt);
      times.losses.push_back(scalars.at("loss"));
    });
    last = Clock::now();
    t.fit(source);
    times.state_bytes = t.resident_state_bytes();
  }
  std::error_code ignored;
  std::filesystem::remove_all(run_dir, ignored);
  if (times.step_seconds.empty()) throw std::runtime_error("no measured steps: steps must exceed warmup");
  return times;
}

}  // namespace dew::bench
