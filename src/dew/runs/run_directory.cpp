#include "dew/runs/run_directory.h"

#include <atomic>
#include <system_error>
#include <vector>

#include "dew/core/atomic_file.h"
#include "dew/core/directory_lock.h"
#include "dew/core/error.h"
#include "dew/runs/run_file_reads.h"
#include "dew/training/checkpoint.h"

namespace fs = std::filesystem;

namespace dew::runs {

namespace {
constexpr const char* kFormat = "dew-run";
constexpr int kVersion = 1;
std::atomic<std::int64_t> reads{0};  // run_file_reads()

const config::Json& require(const config::Json& j, const char* field, const fs::path& file) {
  auto it = j.find(field);
  if (it == j.end()) fail("'", file.string(), "' has no \"", field, "\"; it is not a dew run file (or was cut short)");
  return *it;
}
}  // namespace

fs::path run_file_path(const fs::path& run_dir) { return run_dir / "run.json"; }

bool holds_run(const fs::path& run_dir) {
  std::error_code ec;
  return fs::is_regular_file(run_file_path(run_dir), ec);
}

std::int64_t run_file_reads() { return reads.load(); }

RunFile read_run_file(const fs::path& run_dir) {
  const fs::path file = run_file_path(run_dir);
  ++reads;
  if (!holds_run(run_dir)) {
    fail("'", run_dir.string(), "' is not a run directory (no run.json); give the --out directory of a `dew train` run");
  }
  config::Json j = config::parse_json_file(file);
  if (!j.is_object()) fail("'", file.string(), "' must hold a JSON object, got ", config::json_kind(j));
  const auto& format = require(j, "format", file);
  if (format != kFormat) fail("'", file.string(), "': \"format\" is ", format.dump(), ", expected \"", kFormat, "\"");
  const auto& version = require(j, "version", file);
  if (!version.is_number_integer() || version.get<int>() != kVersion) {
    fail("'", file.string(), "': \"version\" is ", version.dump(), "; this dew reads version ", kVersion,
         " (was the run written by a newer dew?)");
  }
  RunFile run;
  const auto& kind = require(j, "kind", file);
  const auto& tokenizer = require(j, "tokenizer", file);
  if (!kind.is_string()) config::wrong_type(kind, "kind", file.string(), "a string");
  if (!tokenizer.is_string()) config::wrong_type(tokenizer, "tokenizer", file.string(), "a string");
  run.kind = kind.get<std::string>();
  run.tokenizer = tokenizer.get<std::string>();
  if (auto sha = j.find("tokenizer_sha256"); sha != j.end()) {  // optional: older runs lack it
    if (!sha->is_string()) config::wrong_type(*sha, "tokenizer_sha256", file.string(), "a string");
    run.tokenizer_sha256 = sha->get<std::string>();
  }
  run.config = require(j, "config", file);
  if (!run.config.is_object()) config::wrong_type(run.config, "config", file.string(), "an object");
  return run;
}

void write_run_file(const fs::path& run_dir, const RunFile& run) {
  config::Json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["kind"] = run.kind;
  j["tokenizer"] = run.tokenizer;
  if (!run.tokenizer_sha256.empty()) j["tokenizer_sha256"] = run.tokenizer_sha256;
  j["config"] = run.config;
  write_file_atomic(run_file_path(run_dir), j.dump(2) + "\n");
}

void check_fresh_run_dir(const fs::path& run_dir) {
  std::error_code ec;
  if (!fs::exists(run_dir, ec)) {
    check_no_file_in_the_way(run_dir, str("cannot create --out '", run_dir.string(), "'"));
    return;
  }
  if (!fs::is_directory(run_dir, ec)) fail("--out '", run_dir.string(), "' exists and is not a directory; choose another path");
  for (fs::directory_iterator it(run_dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename() == DirectoryLock::kFileName) continue;
    fail("--out '", run_dir.string(), "' is not empty and holds no run.json (it holds '", it->path().filename().string(),
         "'), so it is not a dew run to resume; choose a new or empty directory (nothing was written)");
  }
  if (ec) fail("cannot list --out '", run_dir.string(), "': ", ec.message());
}

FreshRunUndo::~FreshRunUndo() {
  if (kept_ || !training::checkpoint_steps(dir_).empty()) return;
  std::error_code ignored;
  fs::remove(run_file_path(dir_), ignored);  // first: without run.json the rest is no run to resume
  // Everything else too, whatever the kind wrote (tokenizer/, tracking/, sft's data/, temporaries): the
  // directory held nothing but the lock file when the run began, so every entry is the run's own.
  std::vector<fs::path> written;
  for (fs::directory_iterator it(dir_, ignored), end; !ignored && it != end; it.increment(ignored)) {
    if (it->path().filename() != DirectoryLock::kFileName) written.push_back(it->path());
  }
  for (const auto& path : written) fs::remove_all(path, ignored);
  // The lock file last (the directory was empty but for it): DirectoryLock copes with a removed lock file.
  fs::remove(dir_ / DirectoryLock::kFileName, ignored);
  if (created_dir_) fs::remove(dir_, ignored);  // only if empty
}

std::optional<std::string> first_difference(const config::Json& a, const config::Json& b, const std::string& prefix) {
  if (a.is_object() && b.is_object()) {
    for (const auto& [key, value] : a.items()) {
      auto path = config::join_path(prefix, key);
      auto other = b.find(key);
      if (other == b.end()) return path;
      if (auto diff = first_difference(value, *other, path)) return diff;
    }
    for (const auto& [key, value] : b.items()) {
      if (!a.contains(key)) return config::join_path(prefix, key);
    }
    return std::nullopt;
  }
  if (a == b) return std::nullopt;
  return prefix.empty() ? std::string("(the whole config)") : prefix;
}

namespace {

// The value at a dotted path ("model.num_layers") as JSON text, or "(absent)".
std::string value_at(const config::Json& root, const std::string& dotted) {
  const config::Json* at = &root;
  std::size_t start = 0;
  while (start <= dotted.size()) {
    auto end = dotted.find('.', start);
    auto key = dotted.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!at->is_object() || !at->contains(key)) return "(absent)";
    at = &(*at)[key];
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return at->dump();
}

}  // namespace

void check_resume_config(const fs::path& run_dir, config::Json stored, config::Json asked) {
  stored.erase("trainer");
  asked.erase("trainer");
  if (auto field = first_difference(stored, asked)) {
    fail("'", run_dir.string(), "' already holds a run with ", *field, " = ", value_at(stored, *field),
         "; this command asks for ", value_at(asked, *field),
         ". A resumed run can change only trainer.* (e.g. --set trainer.steps=N); "
         "start a new run in another --out directory to change the rest (nothing was written)");
  }
}

}  // namespace dew::runs
