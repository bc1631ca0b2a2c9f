#pragma once
// Builds a local Hugging Face Hub cache the way huggingface_hub lays it out, from a checkpoint directory:
//
//   CACHE/models--org--name/blobs/<sha256 of the file>
//   CACHE/models--org--name/snapshots/<commit>/<file> -> ../../blobs/<sha256>   (relative symlinks)
//   CACHE/models--org--name/refs/<branch>              the commit, no newline
//
// and sets or clears environment variables for the length of a test.
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dew/core/sha256.h"
#include "test_support.h"

namespace dew::test {

// Adds `source`'s files as snapshot `commit` of `repo` ("org/name") and points each of `refs` at it.
inline std::filesystem::path add_hub_snapshot(const std::filesystem::path& cache, const std::string& repo,
                                              const std::filesystem::path& source, const std::string& commit,
                                              const std::vector<std::string>& refs) {
  namespace fs = std::filesystem;
  std::string dir = "models--" + repo;
  dir.replace(dir.find('/'), 1, "--");
  const fs::path root = cache / dir;
  const fs::path snapshot = root / "snapshots" / commit;
  fs::create_directories(root / "blobs");
  fs::create_directories(snapshot);
  for (const auto& entry : fs::directory_iterator(source)) {
    if (!entry.is_regular_file()) continue;
    const std::string bytes = read_text(entry.path());
    const std::string blob = dew::sha256_hex(bytes);
    if (!fs::exists(root / "blobs" / blob)) fs::copy_file(entry.path(), root / "blobs" / blob);
    fs::create_symlink(fs::path("..") / ".." / "blobs" / blob, snapshot / entry.path().filename());
  }
  for (const auto& ref : refs) {
    fs::create_directories((root / "refs" / ref).parent_path());
    write_text(root / "refs" / ref, commit);
  }
  return snapshot;
}

// Sets (or, with nullopt, unsets) an environment variable; the old value comes back at the end of scope.
class ScopedEnvironment {
 public:
  ScopedEnvironment(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value) ::setenv(name_.c_str(), value->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }
  ~ScopedEnvironment() {
    if (old_) ::setenv(name_.c_str(), old_->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace dew::test
