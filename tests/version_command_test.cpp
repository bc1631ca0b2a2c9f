// `dew version` says how this dew was built and what it sees: CI's CUDA build (scripts/cuda_build.sh) runs
// this on machines without a GPU, which is also the check that linking libtorch_cuda leaves a dew that
// starts where there is no driver.
#include <gtest/gtest.h>

#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/cuda.h>

#include <string>

#include "test_support.h"

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(VersionCommand, SaysHowDewWasBuiltAndWhatItSees) {
  auto result = dew::test::run_command("'" + dew::test::dew_binary().string() + "' version");
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "LibTorch 2.11.0")) << result.output;
  // Whether this binary links libtorch_cuda (its hooks registered), asked at run time: the test objects are
  // the same in the CPU build and in CI's CUDA variant (cmake/DewCudaVariant.cmake), which runs them with a
  // `dew` linked the same way; only the files listed there may test CUDA's compile-time switches.
  if (at::detail::getCUDAHooks().isBuilt()) {
    EXPECT_TRUE(contains(result.output, "CUDA: built with CUDA ")) << result.output;
    EXPECT_TRUE(contains(result.output, " and NCCL (multi-process GPU training)")) << result.output;
    if (torch::cuda::is_available()) {
      EXPECT_TRUE(contains(result.output, "CUDA device 0: ")) << result.output;
    } else {
      EXPECT_TRUE(contains(result.output, "CUDA devices: none visible")) << result.output;
    }
  } else {
    EXPECT_TRUE(contains(result.output, "CUDA: not in this build (CPU-only LibTorch)")) << result.output;
  }
}

}  // namespace
