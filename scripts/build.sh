#!/usr/bin/env bash
# Set-up (idempotent), then configure and build dew into build/ (BUILD_DIR to change).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
ninja -C "$BUILD_DIR" -j "${DEW_BUILD_JOBS:-$(nproc)}"
