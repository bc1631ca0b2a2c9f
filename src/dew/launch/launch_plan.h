#pragma once
// What dew launch starts, rank by rank: each process's argv and the variables it gets on top of the
// launcher's environment. Pure functions of their inputs, so --dry-run prints exactly what would run
// and tests can check it without starting anything.
#include <filesystem>
#include <string>
#include <vector>

#include "dew/launch/environment_contract.h"
#include "dew/launch/hostfile.h"
#include "dew/launch/launch_options.h"

namespace dew::launch {

// One process to start.
struct RankCommand {
  int rank = 0;
  std::vector<EnvVar> environment;  // set for this process, over the launcher's own
  std::vector<std::string> argv;    // argv[0] is looked up on PATH like execvp
};

// N processes on this machine: RANK = LOCAL_RANK = 0..N-1, WORLD_SIZE = LOCAL_WORLD_SIZE = N.
struct LocalPlan {
  int nproc = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::vector<EnvVar> extra;  // --env pairs, after the contract
  std::vector<std::string> command;
};
std::vector<RankCommand> local_ranks(const LocalPlan& plan);

// K processes on each host, each one an ssh client running
//     ssh -o BatchMode=yes HOST 'cd DIR && env MASTER_ADDR=... ... COMMAND ARGS'
// The global rank counts hosts in order: with K on every host, rank = host index * K + local index.
struct HostPlan {
  std::vector<Host> hosts;
  int processes_per_host = 0;  // 0: each host's slots, else 1
  std::string master_addr;     // empty: the first host (without a user@ prefix)
  int master_port = 29500;
  std::string directory;       // the remote working directory (the launcher's)
  std::vector<EnvVar> extra;
  std::vector<std::string> command;
};
std::vector<RankCommand> ssh_ranks(const HostPlan& plan);

// The plan for `options` in `mode` (local or ssh): reads the hostfile, takes this directory for ssh,
// and picks a free port for a local launch without --master-port.
std::vector<RankCommand> plan_ranks(const LaunchOptions& options, LaunchMode mode);

// One copy-pasteable shell line: `env NAME=VALUE ... ARGV...`, or just the argv when no variables.
std::string command_line(const RankCommand& rank);

}  // namespace dew::launch
