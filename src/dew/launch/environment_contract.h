#pragma once
// torchrun's environment contract: what every training process reads to join its process group
// (c10d's env:// rendezvous). dew launch sets it, whether it starts the processes here, over ssh, or
// is one task of srun; the training side only ever reads these six variables.
#include <string>
#include <vector>

namespace dew::launch {

struct EnvVar {
  std::string name, value;
};

struct Contract {
  std::string master_addr;  // MASTER_ADDR: the host of rank 0, where the store listens
  int master_port = 0;      // MASTER_PORT
  int rank = 0;             // RANK: 0 .. world_size - 1 over every host
  int world_size = 1;       // WORLD_SIZE
  int local_rank = 0;       // LOCAL_RANK: index on this host (picks the GPU)
  int local_world_size = 1; // LOCAL_WORLD_SIZE: processes on this host
};

// The six variables, in the order above (the order --dry-run prints).
std::vector<EnvVar> contract_environment(const Contract& contract);

// Whether `name` is one of the six: --env may not set them, since they differ per rank.
bool is_contract_variable(const std::string& name);

// `--env KEY=VALUE` entries; KEY must be a shell variable name ([A-Za-z_][A-Za-z0-9_]*) and not one
// of the contract's. Errors name the entry and the fix.
std::vector<EnvVar> parse_env_pairs(const std::vector<std::string>& pairs);

}  // namespace dew::launch
