// The NCCL backend of distributed::ProcessGroup, in a CUDA build on a machine with a GPU: one process runs
// every collective dew's training uses, on the dtypes it sends. One rank, because NCCL refuses two ranks on
// one GPU and the lent GPU machines have one; each collective is then the identity, so the checks are that
// the communicator forms through the TCPStore, that each call's path (flattening, bf16, the double host
// values, a barrier on the bound device) runs, and that the data comes back unchanged. Skips without a
// CUDA device: every CPU build, and the CUDA build CI compiles on machines without a GPU.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <chrono>
#include <vector>

#include "dew/distributed/process_group.h"
#include "dew/launch/free_port.h"

namespace {

using dew::distributed::ProcessGroup;
using dew::distributed::ProcessPlace;

TEST(ProcessGroupNccl, OneProcessRunsEveryCollectiveOnTheGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  ProcessPlace place;  // rank 0 of 1 on 127.0.0.1
  place.master_port = dew::launch::free_port();
  const c10::Device gpu(c10::kCUDA, 0);
  auto group = ProcessGroup::join(place, gpu, std::chrono::seconds(60));
  const auto on_gpu = at::TensorOptions().device(gpu);

  // Gradients of two dtypes: one flattened buffer per dtype.
  std::vector<at::Tensor> grads{at::randn({2, 3}, on_gpu), at::randn({5}, on_gpu.dtype(at::kBFloat16)),
                                at::randn({4}, on_gpu)};
  std::vector<at::Tensor> before;
  for (const auto& g : grads) before.push_back(g.clone());
  group->all_reduce_sum(grads, "gradients");
  for (std::size_t i = 0; i < grads.size(); ++i) {
    EXPECT_TRUE(grads[i].is_cuda()) << i;
    EXPECT_TRUE(at::equal(grads[i], before[i])) << i;
  }

  // A bucket's started sum, finished later (DDP's overlap with backward).
  auto bucket = at::randn({1000}, on_gpu);
  auto expected = bucket.clone();
  auto pending = group->all_reduce_sum_async(bucket, "a bucket");
  pending.wait();
  EXPECT_TRUE(at::equal(bucket, expected));

  // Host values (losses, token counts) travel as one float64 tensor on the GPU.
  EXPECT_EQ(group->all_reduce_sum(std::vector<double>{1.25, -3.0, 1e9}, "step values"),
            (std::vector<double>{1.25, -3.0, 1e9}));

  std::vector<at::Tensor> weights{at::randn({3, 2}, on_gpu)};
  auto weights_before = weights[0].clone();
  group->broadcast(weights, 0, "initial weights");
  EXPECT_TRUE(at::equal(weights[0], weights_before));

  // FSDP's gather and reduce-scatter: with one rank the full tensor is this rank's block.
  auto mine = at::randn({6}, on_gpu);
  auto full = at::empty({6}, on_gpu);
  group->all_gather(full, mine, "a layer's weights");
  EXPECT_TRUE(at::equal(full, mine));
  auto shard = at::empty({6}, on_gpu);
  group->reduce_scatter_sum(shard, full, "a layer's gradients");
  EXPECT_TRUE(at::equal(shard, full));

  group->barrier("the end of the test");
}

}  // namespace
