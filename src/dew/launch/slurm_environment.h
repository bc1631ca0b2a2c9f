#pragma once
// dew launch as one task of srun: Slurm has already started one process per rank on every node, so
// each one translates Slurm's variables into torchrun's contract (environment_contract.h) and
// replaces itself with the training command.
//
//     RANK             <- SLURM_PROCID
//     WORLD_SIZE       <- SLURM_NTASKS (SLURM_NPROCS on old Slurm)
//     LOCAL_RANK       <- SLURM_LOCALID
//     LOCAL_WORLD_SIZE <- this node's entry (SLURM_NODEID) of SLURM_STEP_TASKS_PER_NODE, else
//                         SLURM_NTASKS_PER_NODE, else SLURM_TASKS_PER_NODE ("2(x3),1")
//     MASTER_ADDR      <- the first host of SLURM_STEP_NODELIST, SLURM_JOB_NODELIST or SLURM_NODELIST
//                         ("node[01-04,07],gpu-a" -> node01): rank 0 runs on the step's first node
//     MASTER_PORT      <- MASTER_PORT if set, else 15000 + SLURM_JOB_ID % 20000, so every task of a
//                         job agrees without talking, and jobs sharing a node rarely collide
//
// A missing or garbled variable is a dew::Error naming it and its value.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dew/launch/environment_contract.h"

namespace dew::launch {

// Slurm's compressed hostlist ("node[01-04,07],gpu-a,rack[1-2]-n[1-2]") expanded in order, zero
// padding kept. `variable` names the source in errors.
std::vector<std::string> expand_hostlist(const std::string& hostlist, const std::string& variable);

// Slurm's tasks-per-node list ("2(x3),1" = 2,2,2,1) expanded to one count per node.
std::vector<int> expand_tasks_per_node(const std::string& list, const std::string& variable);

// The port every task of job `job_id` uses when MASTER_PORT is not set.
int slurm_port(long long job_id);

// The contract for this task from its environment (name -> value). --master-addr / --master-port,
// when given, win over what Slurm says.
Contract slurm_contract(const std::map<std::string, std::string>& environment,
                        const std::optional<std::string>& master_addr, const std::optional<int>& master_port);

}  // namespace dew::launch
