#pragma once
// The processes of one job, joined through PyTorch's c10d: rank 0 serves the rendezvous store (TCPStore) at
// MASTER_ADDR:MASTER_PORT, every rank meets there, and the backend links them: Gloo for CPU tensors, NCCL
// for CUDA ones (in a CUDA build). This is the engine torch.distributed runs on, so a dew job and a PyTorch
// job on the same hosts behave alike (same environment, same transport, same failure modes).
//
//   auto& group = distributed::join_process_group(device, timeout);   // once, by `dew train`
//   group.all_reduce_sum(grads, "gradients at step 12");
//
// Every collective is called by every rank in the same order. A collective that fails (a peer died, or
// did not answer within the timeout) throws dew::Error naming this rank, the operation and, from the store,
// the rank that stopped: each rank keeps a heartbeat counter in the store and records its error there
// before it exits (report_failure), so the survivors can say who failed and why instead of hanging.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include "dew/distributed/process_place.h"

namespace dew::distributed {

class ProcessGroup {
 public:
  // Joins the job `place` describes; waits at most `timeout` for the others to arrive.
  static std::unique_ptr<ProcessGroup> join(const ProcessPlace& place, c10::Device device, std::chrono::milliseconds timeout);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  std::int64_t rank() const;
  std::int64_t world() const;
  const ProcessPlace& place() const;

  // Blocking collectives, in place. `what` names the operation in errors ("gradients at step 12").
  void all_reduce_sum(std::vector<at::Tensor>& tensors, const std::string& what);
  std::vector<double> all_reduce_sum(const std::vector<double>& values, const std::string& what);
  void broadcast(std::vector<at::Tensor>& tensors, std::int64_t root, const std::string& what);
  // `full` (contiguous, world x the size of `mine` along dim 0) receives every rank's `mine`, rank order.
  void all_gather(at::Tensor& full, const at::Tensor& mine, const std::string& what);
  // `mine` receives this rank's dim-0 slice of the sum over the ranks of `full` (world x its size).
  void reduce_scatter_sum(at::Tensor& mine, const at::Tensor& full, const std::string& what);
  void barrier(const std::string& what);

  // A sum started now and finished by wait(): backward goes on computing while a bucket of gradients travels.
  class Pending {
   public:
    Pending(ProcessGroup* group, std::shared_ptr<void> work, std::string what)
        : group_(group), work_(std::move(work)), what_(std::move(what)) {}
    void wait();

   private:
    ProcessGroup* group_;
    std::shared_ptr<void> work_;  // the backend's Work, kept opaque so this header needs no c10d
    std::string what_;
  };
  Pending all_reduce_sum_async(at::Tensor tensor, std::string what);

  // Records this rank's fatal error in the store, so the others name it when their collectives fail.
  void report_failure(const std::string& message) noexcept;

 private:
  struct State;
  explicit ProcessGroup(std::unique_ptr<State> state);
  [[noreturn]] void fail_collective(const std::string& what, const std::exception& error);
  // Runs `collective` (which starts a backend operation and waits for it); a failure becomes
  // fail_collective's error naming `what`.
  void run(const std::string& what, const std::function<void()>& collective);
  std::unique_ptr<State> state_;
};

// The process's group: joined by the first call (device and timeout apply then), the same one afterwards.
// Only for a multi-process place (process_place().world > 1).
ProcessGroup& join_process_group(c10::Device device, std::chrono::milliseconds timeout);
// The joined group, or nullptr (a job of one process, or not joined yet).
ProcessGroup* process_group();
// Ends the group (the heartbeat stops, the backend's connections close); at exit, after a final barrier.
void leave_process_group();

}  // namespace dew::distributed
