#pragma once
// Where this process stands in a multi-process job, from the environment torchrun defines and `dew launch`
// sets (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE). None of them set: a job
// of one process. Read once; torch-free, so the data loaders can shard without joining anything.
#include <cstdint>
#include <string>

namespace dew::distributed {

struct ProcessPlace {
  std::int64_t rank = 0, world = 1;              // this process, all processes
  std::int64_t local_rank = 0, local_world = 1;  // on this host (local_rank picks a GPU)
  std::string master_addr = "127.0.0.1";         // where rank 0 serves the rendezvous store
  std::int64_t master_port = 29500;

  bool multi_process() const { return world > 1; }
  // "rank 1/3" for messages.
  std::string describe() const;
};

// Parses the variables; an unparsable or inconsistent value (RANK >= WORLD_SIZE, a port out of range, RANK
// without WORLD_SIZE) throws dew::Error naming the variable and its value.
ProcessPlace place_from_environment();

// This process's place: place_from_environment() on first use, the same answer afterwards.
const ProcessPlace& process_place();

}  // namespace dew::distributed
