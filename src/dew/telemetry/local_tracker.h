#pragma once
// The local tracker: RUN_DIR/tracking/scalars.jsonl, one JSON object per logged step,
//   {"step": 20, "time": 1718000000.5, "scalars": {"loss": 3.1, "lr": 0.0003, "val/ce": 3.3, ...}}
// as the spec's LocalTracker writes it. Lines are appended and flushed one at a time, so a killed run
// loses at most the line being written. Non-finite values are written as null.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace dew::telemetry {

class LocalTracker {
 public:
  // Opens (creating) DIR/scalars.jsonl for appending. Lines with a step greater than `keep_through_step`
  // are dropped first, so a run resumed from a checkpoint at that step has a history that matches it.
  LocalTracker(std::filesystem::path dir, std::int64_t keep_through_step);
  ~LocalTracker();
  LocalTracker(const LocalTracker&) = delete;
  LocalTracker& operator=(const LocalTracker&) = delete;

  void log(std::int64_t step, const std::map<std::string, double>& scalars);
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
  std::FILE* out_ = nullptr;
};

struct ScalarRecord {
  std::int64_t step = 0;
  double time = 0;
  std::map<std::string, double> scalars;  // null values read back as NaN
};

// Reads a scalars.jsonl. A malformed line is an error naming the file and line, except a torn last line
// (a run killed mid-write), which is skipped.
std::vector<ScalarRecord> read_scalars(const std::filesystem::path& file);

// (step, value) of one scalar across records, skipping records without it.
std::vector<std::pair<double, double>> scalar_series(const std::vector<ScalarRecord>& records, const std::string& name);

}  // namespace dew::telemetry
