#!/usr/bin/env bash
# Set-up (idempotent), then configure and build dew into build/ (BUILD_DIR to change).
#   bash scripts/build.sh            # everything: dew, the test binaries, the benchmarks (scripts/test.sh)
#   bash scripts/build.sh dew_cli    # only these ninja targets (the demos: the `dew` command and its libraries)
# Both use the same build directory, so a later full build compiles only what the first one left out.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
ninja -C "$BUILD_DIR" -j "${DEW_BUILD_JOBS:-$(nproc)}" "$@"
