#!/usr/bin/env bash
# Builds dew-llama-greedy (tools/llama_cpp/greedy_tokens.cpp): llama.cpp's own library, from the sources in
# PyPI's llama-cpp-python sdist (the one setup.sh unpacks the vocabularies from), and a small program on its
# C API that loads a GGUF, tokenizes and continues greedily. The export tests run every GGUF dew writes
# through it (tests/interop_gguf_llama_cpp_test.cpp), so "llama.cpp runs dew's exports" is checked by
# llama.cpp itself. Prints the program's path on stdout; everything else goes to stderr.
# Cached in $DEW_CACHE/llama.cpp/greedy-<version>-<hash of the program's sources>: a second run returns at once.
# Only llama.cpp's library and ggml are compiled (no tools, server or tests): 3.5 min of CPU time (680 s of
# wall time on the 2-core VM while other builds ran).
#   LLAMA_JOBS  build parallelism (default: the core count)
set -euo pipefail
cd "$(dirname "$0")/.."
LLAMA_CPP_VERSION=0.3.36
DEW_CACHE=${DEW_CACHE:-$HOME/.cache/dew}
dir=$DEW_CACHE/llama.cpp
sdist=$dir/llama_cpp_python-$LLAMA_CPP_VERSION.tar.gz
hash=$(cat tools/llama_cpp/greedy_tokens.cpp tools/llama_cpp/CMakeLists.txt | sha256sum | cut -c1-12)
build=$dir/greedy-$LLAMA_CPP_VERSION-$hash
program=$build/dew-llama-greedy
log() { printf '[setup-llama.cpp] %s\n' "$*" >&2; }

if [ -x "$program" ]; then echo "$program"; exit 0; fi
mkdir -p "$dir"
if [ ! -s "$sdist" ]; then
  log "downloading the llama-cpp-python $LLAMA_CPP_VERSION sdist"
  python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    "llama-cpp-python==$LLAMA_CPP_VERSION" -d "$dir" >&2
fi
source=$dir/llama_cpp_python-$LLAMA_CPP_VERSION/vendor/llama.cpp
if [ ! -f "$source/.complete" ]; then
  tar -xzf "$sdist" -C "$dir" "llama_cpp_python-$LLAMA_CPP_VERSION/vendor/llama.cpp"
  touch "$source/.complete"
fi
start=$(date +%s)
log "building llama.cpp $LLAMA_CPP_VERSION's library and dew-llama-greedy in $build (once)"
rm -rf "$build.partial"
cmake -S tools/llama_cpp -B "$build.partial" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_CPP_SOURCE="$source" >&2
ninja -C "$build.partial" -j "${LLAMA_JOBS:-$(nproc)}" dew-llama-greedy >&2
# The finished build moves into place in one rename, so an interrupted build is never taken for a good one
# (the CMake cache names the .partial path, so a later rebuild starts over rather than reusing it).
mv "$build.partial" "$build"
log "built in $(( $(date +%s) - start )) s"
echo "$program"
