#pragma once
// What `dew launch` was asked for, and which of its three ways of starting processes that means:
// local processes (--nproc), one ssh client per process on other machines (--hosts / --hostfile), or
// this process as one task of srun (--slurm, or SLURM_PROCID set and neither of the others given).
#include <optional>
#include <string>
#include <vector>

namespace dew::launch {

struct LaunchOptions {
  std::optional<int> nproc;                // --nproc
  std::optional<std::string> hosts;        // --hosts a,b
  std::optional<std::string> hostfile;     // --hostfile F
  std::optional<int> processes_per_host;   // --processes-per-host
  std::optional<std::string> master_addr;  // --master-addr
  std::optional<int> master_port;          // --master-port
  std::vector<std::string> env;            // --env KEY=VALUE, repeatable
  double grace_seconds = 30;               // --grace-seconds
  bool slurm = false;                      // --slurm
  bool dry_run = false;                    // --dry-run
  std::vector<std::string> command;        // after `--`
};

enum class LaunchMode { local, ssh, slurm };

// Checks the combination and the values (each error names the flag, its value and what to give
// instead) and says which mode they select. `under_slurm`: SLURM_PROCID is set.
LaunchMode check_launch_options(const LaunchOptions& options, bool under_slurm);

}  // namespace dew::launch
