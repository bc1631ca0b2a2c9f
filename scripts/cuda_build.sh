#!/usr/bin/env bash
# The CUDA build, checked where there is no GPU, so dew's GPU code cannot rot (scripts/test.sh runs it, and
# so CI): LibTorch's CUDA half (scripts/setup_cuda.sh), then the CUDA variant of the CPU tree in build/
# (BUILD_DIR; cmake/DewCudaVariant.cmake): the few files whose code differs with CUDA compiled again with its
# switches, linked with the objects scripts/build.sh compiled into `dew` (bin-cuda/dew) and the tensor test
# binary (tests/dew_cuda_tests) against libtorch_cuda; then a smoke check that the result runs on this
# machine: `dew version` must say it was built with CUDA, and the tests in CUDA_SMOKE_TESTS run through the
# CUDA binaries (a tiny `dew train lm` on the CPU, two Gloo processes, the refusal of trainer.device=cuda
# without a GPU; the tests that need a GPU skip). Run it after scripts/build.sh (it builds what is missing).
#
# A tree that is CUDA throughout (-DDEW_CUDA=ON, every file compiled against the CUDA LibTorch) is what a GPU
# machine builds: scripts/gpu_check.sh pack.
#
# Without the CUDA toolkit (a developer machine, say; scripts/cuda_toolkit.sh says where it looks) it says
# so and exits 0, unless DEW_REQUIRE_CUDA_BUILD=1. DEW_BUILD_JOBS sets ninja's -j (default: the core count).
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[cuda-build] %s\n' "$*"; }

source scripts/cuda_toolkit.sh
CUDA_HOME=$(cuda_toolkit_root)
if [ -z "$CUDA_HOME" ]; then
  if [ "${DEW_REQUIRE_CUDA_BUILD:-0}" = 1 ]; then
    log "error: no CUDA toolkit (bin/nvcc and include/cuda_runtime_api.h under CUDA_HOME, the nvcc on PATH or /usr/local/cuda) and DEW_REQUIRE_CUDA_BUILD=1"
    exit 1
  fi
  log "skipped: no CUDA toolkit here (bin/nvcc and include/cuda_runtime_api.h under CUDA_HOME, the nvcc on PATH or /usr/local/cuda); install CUDA 13 to build it, DEW_REQUIRE_CUDA_BUILD=1 makes this an error"
  exit 0
fi
export CUDA_HOME   # setup_cuda.sh and CMake take the same toolkit

bash scripts/setup.sh >/dev/null   # the Debian packages and the wheel (idempotent; build.sh usually ran it)
bash scripts/setup_cuda.sh
BUILD_DIR=${BUILD_DIR:-build}
start=$SECONDS
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake -S . -B "$BUILD_DIR" -DDEW_CUDA_VARIANT=ON -DCUDAToolkit_ROOT="$CUDA_HOME" >/dev/null
ninja -C "$BUILD_DIR" -j "${DEW_BUILD_JOBS:-$(nproc)}" dew_cuda_cli dew_cuda_tests
log "linked the CUDA variant in $BUILD_DIR (bin-cuda/dew, tests/dew_cuda_tests) in $((SECONDS - start)) s"

version=$("$BUILD_DIR/bin-cuda/dew" version)
printf '%s\n' "$version"
if ! grep -q "^CUDA: built with CUDA" <<<"$version"; then
  log "error: $BUILD_DIR/bin-cuda/dew version does not say it was built with CUDA (see above)"
  exit 1
fi
SMOKE=${CUDA_SMOKE_TESTS:-VersionCommand.*:ProcessGroupNccl.*:Trainer.RunsOnCudaWithBf16Compute:ReliabilityInputs.StartRefusesCudaWithoutAGpuBeforeWritingRunJson:TrainCommand.TrainsEvaluatesGeneratesAndResumes:DistributedTraining.TwoProcessesTakeTheStepOfOneBitForBit}
log "smoke tests through the CUDA build: $SMOKE"
DEW_BIN=$PWD/$BUILD_DIR/bin-cuda/dew DEW_FIXTURES=$PWD/tests/fixtures "$BUILD_DIR/tests/dew_cuda_tests" --gtest_filter="$SMOKE" --gtest_brief=1
