#!/usr/bin/env bash
# JEPA demo: I-JEPA on Fashion-MNIST (from Debian's dataset-fashion-mnist, which the set-up installs) on the
# CPU in a few minutes, then its encoder probed:
#   1. dew train jepa (the defaults: ViT patch 4, 128 features, 4 layers; predictor 64 x 2; 2,000 steps of
#      64 images), with a kNN probe on training images at each evaluation (tracking/probe.jsonl, and the
#      plots tracking/loss.png and tracking/probe_knn_top1.png);
#   2. dew probe --method knn and --method linear on the test split, each beside a freshly initialised
#      encoder and the raw pixels.
# Outputs go to out/jepa (OUT to change), replaced on every run. Extra arguments go to `dew train jepa`
# (e.g. --set trainer.steps=4000).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh dew_cli   # only `dew`: the tests and benchmarks are scripts/test.sh's
OUT=${OUT:-out}/jepa
DEW=${BUILD_DIR:-build}/bin/dew
DATA=/usr/share/datasets/fashion-mnist
rm -rf "$OUT"
mkdir -p "$OUT"
"$DEW" train jepa --data "$DATA" --out "$OUT/run" "$@"
"$DEW" probe "$OUT/run" --method knn --json | tee "$OUT/knn.json"
"$DEW" probe "$OUT/run" --method linear --json | tee "$OUT/linear.json"
echo "plots: $OUT/run/tracking/loss.png and $OUT/run/tracking/probe_knn_top1.png"
