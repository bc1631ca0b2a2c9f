#!/usr/bin/env bash
# Unpacks LibTorch's CUDA half from the pinned PyPI `torch` wheel (the one scripts/setup.sh caches) into a
# LibTorch of its own, $DEW_CACHE/libtorch-<version>-cuda, for the CUDA build (scripts/cuda_build.sh,
# -DDEW_CUDA=ON). Opt-in: scripts/setup.sh runs it only when DEW_CUDA_BUILD=1. No GPU and no Python torch
# are needed; the CUDA toolkit is (its headers and libraries; scripts/cuda_toolkit.sh says where it looks).
#
# The tree has the wheel's layout (include/, share/, lib/), the CPU libraries and the CUDA ones side by side,
# so CMake reads it exactly as it reads a pip-installed torch/ directory on a GPU machine. libtorch_cuda.so
# needs, besides the toolkit's libraries (cuBLAS, cuFFT, cuRAND, cuSPARSE, cuSOLVER, NVRTC, cuDNN, NCCL),
# three that a toolkit install usually lacks (cuFile, cuSPARSELt, NVSHMEM): every library the loader cannot
# find is fetched from its NVIDIA wheel on PyPI, pinned to what torch 2.11.0 requires, and placed in lib/,
# where the wheel's own rpath ($ORIGIN) finds it. Idempotent: a second run returns at once.
set -euo pipefail
source "$(dirname "$0")/cuda_toolkit.sh"

TORCH_VERSION=2.11.0
DEW_CACHE=${DEW_CACHE:-$HOME/.cache/dew}
TREE=$DEW_CACHE/libtorch-$TORCH_VERSION-cuda
TMP=""
CUDA_ROOT=""
trap '[ -z "$TMP" ] || rm -rf "$TMP"' EXIT

log() { printf '[setup-cuda] %s\n' "$*"; }
die() { printf '[setup-cuda] error: %s\n' "$*" >&2; exit 1; }

# The wheel that provides each library libtorch_cuda may miss, pinned to torch 2.11.0's requirements
# (its METADATA, and cuda-toolkit 13.0.2's for cufile/cudart/cupti). The rest of its needs are the
# toolkit's core libraries: if one of those is missing, the toolkit install is incomplete.
wheel_for() {
  case $1 in
    libcufile.so.0) echo "nvidia-cufile==1.15.1.6.*" ;;
    libcusparseLt.so.0) echo "nvidia-cusparselt-cu13==0.8.0" ;;
    libnvshmem_host.so.3) echo "nvidia-nvshmem-cu13==3.4.5" ;;
    libcudnn.so.9) echo "nvidia-cudnn-cu13==9.19.0.56" ;;
    libnccl.so.2) echo "nvidia-nccl-cu13==2.28.9" ;;
    libcudart.so.13) echo "nvidia-cuda-runtime==13.0.96.*" ;;
    libcupti.so.13) echo "nvidia-cuda-cupti==13.0.85.*" ;;
    *) return 1 ;;
  esac
}

# Libraries that the loader cannot find for the CUDA libraries in $1, with the toolkit's on the path.
# libcuda.so.1 is the GPU driver's (only libcaffe2_nvrtc, loaded on demand, names it): never required here.
missing_libraries() {
  local lib=$1 cuda_lib=$2
  LD_LIBRARY_PATH="$lib:$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    ldd "$lib/libtorch_cuda.so" "$lib/libtorch_cuda_linalg.so" "$lib/libc10_cuda.so" \
    | awk '/not found/ && $1 != "libcuda.so.1" {print $1}' | sort -u
}

fetch_from_wheels() {
  local lib=$1 tmp=$2; shift 2
  local requirements=() name req
  for name in "$@"; do
    req=$(wheel_for "$name") || die "$name, which libtorch_cuda.so needs, is neither in the CUDA toolkit ($CUDA_ROOT) nor one of the libraries this script fetches; install the toolkit's libraries (CUDA 13), or set CUDA_HOME to a complete toolkit"
    requirements+=("$req")
  done
  log "fetching from PyPI what the toolkit lacks: ${requirements[*]}"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$tmp/nv" "${requirements[@]}"
  for w in "$tmp"/nv/*.whl; do unzip -q -o "$w" 'nvidia/*' -d "$tmp/nv"; done
  # Every file of each library's directory: cuDNN and NVSHMEM load companions (libcudnn_*.so.9,
  # nvshmem_bootstrap_*.so.3) from beside themselves at run time.
  for name in "$@"; do
    local found; found=$(find "$tmp/nv/nvidia" -name "$name" | head -n1)
    [ -n "$found" ] || die "$name is not in the wheel $(wheel_for "$name")"
    cp -L "$(dirname "$found")"/*.so* "$lib/"
  done
  # NCCL from its wheel: c10d's ProcessGroupNCCL.hpp includes nccl.h, which the toolkit then lacks too.
  if [ -f "$tmp/nv/nvidia/nccl/include/nccl.h" ]; then cp "$tmp/nv/nvidia/nccl/include/"*.h "$lib/../include/"; fi
}

install_libtorch_cuda() {
  if [ -f "$TREE/.complete" ]; then log "LibTorch $TORCH_VERSION with CUDA: cached in $TREE"; return; fi
  local wheel
  wheel=$(ls "$DEW_CACHE"/wheels/torch-"$TORCH_VERSION"-*.whl 2>/dev/null | head -n1 || true)
  [ -n "$wheel" ] || die "the torch $TORCH_VERSION wheel is not in $DEW_CACHE/wheels; run scripts/setup.sh first"
  CUDA_ROOT=$(cuda_toolkit_root)
  [ -n "$CUDA_ROOT" ] || die "no CUDA toolkit (bin/nvcc and include/cuda_runtime_api.h under CUDA_HOME, the nvcc on PATH or /usr/local/cuda); install CUDA 13 or set CUDA_HOME"
  local cuda_lib=$CUDA_ROOT/lib64; [ -d "$cuda_lib" ] || cuda_lib=$CUDA_ROOT/lib

  log "unpacking LibTorch with CUDA from $(basename "$wheel") (about 1 GB)"
  local tmp; tmp=$(mktemp -d "$DEW_CACHE/.libtorch-cuda.XXXXXX")
  TMP=$tmp   # removed at exit: a failed run leaves no gigabyte behind
  unzip -q "$wheel" 'torch/include/*' 'torch/share/*' 'torch/lib/libc10.so' 'torch/lib/libtorch_cpu.so' \
    'torch/lib/libtorch.so' 'torch/lib/libgomp.so.1' 'torch/lib/libshm.so' 'torch/lib/libc10_cuda.so' \
    'torch/lib/libtorch_cuda.so' 'torch/lib/libtorch_cuda_linalg.so' 'torch/lib/libtorch_nvshmem.so' \
    'torch/lib/libcaffe2_nvrtc.so' -d "$tmp"
  local missing
  missing=$(missing_libraries "$tmp/torch/lib" "$cuda_lib")
  # shellcheck disable=SC2086  # one library name per word
  if [ -n "$missing" ]; then fetch_from_wheels "$tmp/torch/lib" "$tmp" $missing; fi
  missing=$(missing_libraries "$tmp/torch/lib" "$cuda_lib")
  [ -z "$missing" ] || die "still not found after fetching: $missing"
  echo "$TORCH_VERSION $(basename "$wheel") cuda=$CUDA_ROOT" > "$tmp/torch/.complete"
  rm -rf "$TREE"
  mv "$tmp/torch" "$TREE"   # the rename makes a half-unpacked tree impossible
  log "LibTorch with CUDA: $TREE"
}

install_libtorch_cuda
