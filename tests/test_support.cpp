#include "test_support.h"

#include "dew/core/error.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace dew::test {
namespace fs = std::filesystem;

fs::path fixtures() {
  const char* env = std::getenv("DEW_FIXTURES");
  return env ? fs::path(env) : fs::path(DEW_TEST_FIXTURES_DEFAULT);
}

fs::path dew_binary() {
  const char* env = std::getenv("DEW_BIN");
  return env ? fs::path(env) : fs::path(DEW_TEST_BIN_DEFAULT);
}

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const dew::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string dew_single_threaded(const std::string& args) {
  return "DEW_THREADS=1 '" + dew_binary().string() + "' " + args;
}

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "dew-test-XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

CommandResult run_command(const std::string& command_line) {
  std::string full = command_line + " 2>&1";
  FILE* pipe = ::popen(full.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + command_line);
  std::string output;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) output.append(buf.data(), n);
  int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace dew::test
