#include "dew/launch/program.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "dew/core/error.h"
#include "dew/core/printable.h"

extern char** environ;

namespace dew::launch {

namespace {
bool executable_file(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(path.c_str(), X_OK) == 0;
}
}  // namespace

std::string find_program(const std::string& name) {
  if (name.empty()) fail("the command after '--' is an empty word; give a program name or path");
  if (name.find('/') != std::string::npos) {
    if (!executable_file(name)) {
      fail("command '", printable(name), "' is not an executable file; check the path (and its x permission)");
    }
    return name;
  }
  const char* path_variable = std::getenv("PATH");
  // execvp's default when PATH is unset.
  std::string path = path_variable ? path_variable : "/bin:/usr/bin";
  std::string::size_type start = 0;
  while (true) {
    auto colon = path.find(':', start);
    std::string directory = path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string candidate = (directory.empty() ? std::string(".") : directory) + "/" + name;
    if (executable_file(candidate)) return candidate;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  fail("command '", printable(name), "' is not on PATH (", printable(path),
       "); give its path (e.g. ./build/bin/dew) or add its directory to PATH");
}

std::vector<std::string> environment_with(const std::vector<EnvVar>& overrides) {
  std::vector<std::string> out;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string text = *entry;
    std::string name = text.substr(0, text.find('='));
    bool replaced = false;
    for (const auto& var : overrides) replaced = replaced || var.name == name;
    if (!replaced) out.push_back(text);
  }
  for (std::size_t i = 0; i < overrides.size(); ++i) {
    // A later --env of the same name wins, as in `env A=1 A=2`.
    bool later = false;
    for (std::size_t j = i + 1; j < overrides.size(); ++j) later = later || overrides[j].name == overrides[i].name;
    if (!later) out.push_back(overrides[i].name + "=" + overrides[i].value);
  }
  return out;
}

void replace_process(const std::vector<std::string>& argv, const std::vector<EnvVar>& overrides) {
  std::string program = find_program(argv.at(0));
  std::vector<std::string> environment = environment_with(overrides);
  std::vector<char*> arg_pointers, env_pointers;
  for (const auto& arg : argv) arg_pointers.push_back(const_cast<char*>(arg.c_str()));
  arg_pointers.push_back(nullptr);
  for (const auto& var : environment) env_pointers.push_back(const_cast<char*>(var.c_str()));
  env_pointers.push_back(nullptr);
  ::execve(program.c_str(), arg_pointers.data(), env_pointers.data());
  fail("cannot run '", printable(program), "': ", std::strerror(errno));
}

}  // namespace dew::launch
