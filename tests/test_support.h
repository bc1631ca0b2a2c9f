#pragma once
// Shared helpers for tests: where fixtures are, temporary directories that clean up, running the CLI.
#include <filesystem>
#include <functional>
#include <string>

namespace dew::test {

std::filesystem::path fixtures();  // tests/fixtures (DEW_FIXTURES, set by ctest)
std::filesystem::path dew_binary();  // the built `dew` (DEW_BIN, set by ctest)
// A shell command line running the built `dew` with `args` on one intra-op thread (tiny models on a loaded
// 2-core machine are all OpenMP barriers otherwise).
std::string dew_single_threaded(const std::string& args);

class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int status;
  std::string output;  // stdout and stderr together
};
// The message of the dew::Error that `body` throws, or "(no error)" when it throws none.
std::string error_of(const std::function<void()>& body);

// Runs a shell command line, capturing its output.
CommandResult run_command(const std::string& command_line);

void write_text(const std::filesystem::path& path, const std::string& text);
std::string read_text(const std::filesystem::path& path);

}  // namespace dew::test
