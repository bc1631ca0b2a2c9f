#pragma once
// Data-parallel gradient averaging overlapped with backward, as PyTorch's DDP reducer does it: the
// trainable parameters are grouped into buckets of about `bucket_bytes`, in reverse registration order (the
// order backward produces their gradients); each parameter's gradient is a view into its bucket, so
// accumulation over micro-batches adds in place and the bucket is the all-reduce buffer, with no copies.
// During the backward of a step's last micro-batch, a bucket whose gradients are all final starts its sum
// over the processes at once (a post-accumulate-grad hook per parameter) while backward goes on with the
// rest. Buckets leave in index order on every rank, as Gloo and NCCL need the same collective order
// everywhere.
//
//   GradientBuckets buckets(group, trainable_params);
//   buckets.zero_gradients();                       // start of each step
//   for each micro-batch: if last, buckets.arm("gradients at step 7"); loss.backward();
//   buckets.finish();                               // every gradient = the sum over the processes
//
// Sums, not means: the trainer divides by the token count of the global batch, so N processes with a
// global batch B take the step one process takes with B.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/Tensor.h>

#include "dew/distributed/process_group.h"

namespace dew::distributed {

class GradientBuckets {
 public:
  static constexpr std::int64_t kDefaultBucketBytes = 25 << 20;  // PyTorch DDP's bucket_cap_mb

  GradientBuckets(ProcessGroup& group, std::vector<at::Tensor> params, std::int64_t bucket_bytes = kDefaultBucketBytes);
  ~GradientBuckets();  // removes the hooks
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Every gradient becomes a zeroed view into its bucket.
  void zero_gradients();
  // From now until finish(), a completed bucket starts its all-reduce. `what` names it in errors.
  void arm(std::string what);
  // Starts the buckets that have not left (parameters that got no gradient this step count as final) and
  // waits for all of them.
  void finish();

  std::int64_t bucket_count() const { return static_cast<std::int64_t>(buckets_.size()); }

  // Called by a parameter's hook once its gradient has been accumulated.
  void gradient_ready(std::size_t param_index);

 private:
  struct Bucket {
    at::Tensor buffer;                  // flat, one dtype
    std::vector<std::size_t> members;   // parameter indices
    std::vector<at::Tensor> views;      // each member's gradient as a view of buffer
    std::size_t ready = 0;
    bool started = false;
    std::unique_ptr<ProcessGroup::Pending> pending;
  };
  void launch_ready_buckets();
  void launch(Bucket& bucket);

  ProcessGroup& group_;
  std::vector<at::Tensor> params_;
  std::vector<std::pair<std::size_t, std::size_t>> slot_;  // param index -> (bucket, position in bucket)
  std::vector<Bucket> buckets_;
  std::vector<bool> param_ready_;
  std::size_t next_launch_ = 0;
  bool armed_ = false;
  std::string what_;
};

}  // namespace dew::distributed
