#!/usr/bin/env bash
# Set-up, build, the CUDA build (compiled without a GPU, then a smoke check; skipped where there is no
# nvcc), llama.cpp's library for the export checks, then the whole test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
bash scripts/cuda_build.sh
BUILD_DIR=${BUILD_DIR:-build}
# The round trips in which transformers, peft and gguf read dew's exports run with setup's reference venv.
export DEW_REFERENCE_PYTHON=${DEW_REFERENCE_PYTHON:-${DEW_CACHE:-$HOME/.cache/dew}/venv-reference/bin/python}
# llama.cpp itself runs every GGUF dew exports (tests/interop_gguf_llama_cpp_test.cpp): its library and a small
# program on its C API, built once from the pinned sdist and cached (scripts/setup_llama_cpp.sh).
DEW_LLAMA_GREEDY=${DEW_LLAMA_GREEDY:-$(bash scripts/setup_llama_cpp.sh)}
export DEW_LLAMA_GREEDY
cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" --timeout 900
