#!/usr/bin/env bash
# Set-up, build, the CUDA build (compiled without a GPU, then a smoke check; skipped where there is no
# nvcc), then the whole test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
bash scripts/cuda_build.sh
BUILD_DIR=${BUILD_DIR:-build}
# The round trips in which transformers, peft and gguf read dew's exports run with setup's reference venv.
export DEW_REFERENCE_PYTHON=${DEW_REFERENCE_PYTHON:-${DEW_CACHE:-$HOME/.cache/dew}/venv-reference/bin/python}
cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" --timeout 900
