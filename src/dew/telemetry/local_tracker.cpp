#include "dew/telemetry/local_tracker.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>

#include <nlohmann/json.hpp>

#include "dew/core/atomic_file.h"
#include "dew/core/error.h"

namespace fs = std::filesystem;

namespace dew::telemetry {
namespace {

constexpr const char* kFileName = "scalars.jsonl";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// Parses one line; returns false for a line that is not a scalars record.
bool parse_record(const std::string& line, ScalarRecord& out) {
  auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer() || !j.contains("scalars") ||
      !j["scalars"].is_object()) {
    return false;
  }
  out.step = j["step"].get<std::int64_t>();
  out.time = j.contains("time") && j["time"].is_number() ? j["time"].get<double>() : 0.0;
  out.scalars.clear();
  for (auto it = j["scalars"].begin(); it != j["scalars"].end(); ++it) {
    out.scalars[it.key()] = it.value().is_number() ? it.value().get<double>() : std::nan("");
  }
  return true;
}

}  // namespace

LocalTracker::LocalTracker(fs::path dir, std::int64_t keep_through_step) : file_(dir / kFileName) {
  fs::create_directories(dir);
  if (fs::exists(file_)) {
    // Keep the records of steps the resumed run has already taken; rewrite atomically.
    std::string kept;
    bool dropped = false;
    for (const auto& line : lines_of(read_file(file_))) {
      ScalarRecord record;
      if (parse_record(line, record) && record.step <= keep_through_step) {
        kept += line + "\n";
      } else {
        dropped = true;
      }
    }
    if (dropped) write_file_atomic(file_, kept);
  }
  out_ = std::fopen(file_.c_str(), "ab");
  if (!out_) fail("cannot open '", file_.string(), "' for appending: ", std::strerror(errno));
}

LocalTracker::~LocalTracker() {
  if (out_) std::fclose(out_);
}

void LocalTracker::log(std::int64_t step, const std::map<std::string, double>& scalars) {
  nlohmann::ordered_json j;
  j["step"] = step;
  j["time"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  j["scalars"] = nlohmann::ordered_json::object();
  for (const auto& [name, value] : scalars) {
    j["scalars"][name] = std::isfinite(value) ? nlohmann::ordered_json(value) : nlohmann::ordered_json(nullptr);
  }
  auto line = j.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), out_) != line.size() || std::fflush(out_) != 0) {
    fail("cannot write '", file_.string(), "': ", std::strerror(errno), " (is the disk full?)");
  }
}

std::vector<ScalarRecord> read_scalars(const fs::path& file) {
  auto lines = lines_of(read_file(file));
  std::vector<ScalarRecord> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    ScalarRecord record;
    if (parse_record(lines[i], record)) {
      out.push_back(std::move(record));
    } else if (i + 1 < lines.size()) {
      fail("'", file.string(), "' line ", i + 1, " is not a {\"step\": N, \"scalars\": {...}} record");
    }
  }
  return out;
}

std::vector<std::pair<double, double>> scalar_series(const std::vector<ScalarRecord>& records, const std::string& name) {
  std::vector<std::pair<double, double>> out;
  for (const auto& r : records) {
    auto it = r.scalars.find(name);
    if (it != r.scalars.end()) out.emplace_back(static_cast<double>(r.step), it->second);
  }
  return out;
}

}  // namespace dew::telemetry
