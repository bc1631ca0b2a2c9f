#pragma once
// Running a program the way execvp would, with checks done before anything starts: the executable is
// looked up on PATH in the launcher, so a misspelt command is one error naming it rather than N ranks
// failing with status 127.
#include <string>
#include <vector>

#include "dew/launch/environment_contract.h"

namespace dew::launch {

// The file execvp would run for `name`: `name` itself when it holds a '/', else the first executable
// regular file PATH/name. An Error naming the command, PATH and the fix when there is none.
std::string find_program(const std::string& name);

// This process's environment with `overrides` set (added, or replacing a same-named variable), as
// NAME=VALUE strings for execve.
std::vector<std::string> environment_with(const std::vector<EnvVar>& overrides);

// Replaces this process with `argv` (argv[0] looked up like find_program) in this environment plus
// `overrides`. Returns only by throwing an Error naming the program and the reason.
[[noreturn]] void replace_process(const std::vector<std::string>& argv, const std::vector<EnvVar>& overrides);

}  // namespace dew::launch
