#pragma once
// The machines of a multi-host launch: `--hosts a,b` or an MPI-style hostfile, one host per line:
//
//     # comments and blank lines are skipped
//     node01 slots=4     # slots: processes on that host (--processes-per-host overrides every host)
//     node02
//
// Errors name the file and line (or the --hosts value) and what to write instead.
#include <filesystem>
#include <string>
#include <vector>

namespace dew::launch {

struct Host {
  std::string name;  // as given to ssh: a name, an address, or user@name
  int slots = 0;     // processes on this host from `slots=K`; 0 = not given
};

// `--hosts h1,h2,...`: names separated by commas, no slots.
std::vector<Host> parse_host_list(const std::string& list);

// A hostfile's text; `file` names it in errors.
std::vector<Host> parse_hostfile(const std::string& text, const std::string& file);

// Reads and parses a hostfile; unreadable or hostless files are errors naming it.
std::vector<Host> read_hostfile(const std::filesystem::path& file);

}  // namespace dew::launch
