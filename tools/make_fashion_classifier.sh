#!/usr/bin/env bash
# Trains the Fashion-MNIST classifier `dew eval` measures diffusion samples with (runs/kinds/sample_quality.h)
# and installs it as assets/classifiers/fashion_mnist/{config.json,model.safetensors}:
#
#   bash tools/make_fashion_classifier.sh            # ~5 minutes on 2 CPU cores
#
# Needs Debian's dataset-fashion-mnist (scripts/setup.sh installs it) and a built dew (build/bin/dew or DEW).
# The run is `dew train classifier` with its defaults (3 stages of 32/64/128 channels, AdamW 2e-3, 3000 steps
# of 128 images, seed 0); its test-split accuracy goes into the asset's README.
set -euo pipefail
cd "$(dirname "$0")/.."
DEW=${DEW:-build/bin/dew}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
OUT=assets/classifiers/fashion_mnist
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$DEW" train classifier --data "$DATA" --out "$work/run" --set trainer.eval_every=1000 --set trainer.log_every=250
step=$(ls "$work/run" | grep -E '^[0-9]+$' | sort -n | tail -1)
accuracy=$("$DEW" eval "$work/run" --json | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["accuracy"], 4))')
mkdir -p "$OUT"
python3 - "$work/run/run.json" "$OUT/config.json" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))["config"]["model"]
json.dump(config, open(sys.argv[2], "w"), indent=2)
PY
cp "$work/run/$step/params.safetensors" "$OUT/model.safetensors"
cat > "$OUT/README.md" <<MD
# Fashion-MNIST classifier (dew's sample-quality network)

Made by \`bash tools/make_fashion_classifier.sh\` (\`dew train classifier --data $DATA\`, defaults, $step steps),
on $(date -u +%F). Test-split (t10k, 10,000 images) accuracy: $accuracy.

\`dew eval\` of a diffusion run on 28x28 grey images in 10 classes computes, with this network, the Fréchet
distance between the pooled 128-feature vectors of real and generated images and the classifier's accuracy on
class-conditional samples. It is not Inception: the distances are comparable between dew runs only.
Training data: Fashion-MNIST (Zalando Research, MIT licence), from Debian's dataset-fashion-mnist.
MD
echo "installed $OUT (step $step, test accuracy $accuracy)"
