# shellcheck shell=bash
# Sourced by scripts/cuda_build.sh and scripts/setup_cuda.sh: where the CUDA toolkit is.
#
#   cuda_toolkit_root   prints the first of CUDA_HOME, the toolkit of the nvcc on PATH (symlinks resolved)
#                       and /usr/local/cuda that has bin/nvcc and include/cuda_runtime_api.h; nothing if none
#
# Checked rather than taken from nvcc's path alone: an nvcc on PATH may be a wrapper script elsewhere
# (this machine kind has one in /usr/local/bin), whose parent directory is no toolkit.
cuda_toolkit_root() {
  local candidates=() nvcc root
  if [ -n "${CUDA_HOME:-}" ]; then candidates+=("$CUDA_HOME"); fi
  nvcc=$(command -v nvcc || true)
  if [ -n "$nvcc" ]; then candidates+=("$(dirname "$(dirname "$(readlink -f "$nvcc")")")"); fi
  candidates+=(/usr/local/cuda)
  for root in "${candidates[@]}"; do
    if [ -x "$root/bin/nvcc" ] && [ -f "$root/include/cuda_runtime_api.h" ]; then
      echo "$root"
      return
    fi
  done
}
