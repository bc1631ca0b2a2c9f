#!/usr/bin/env bash
# The check for a lent GPU machine (the device tool's nvidia-h200 or nvidia-h100-x1): dew's CUDA tests, then
# GPT-2-small-class training in bf16, dew against PyTorch eager, in one call well inside its 10 minutes.
#
# Two halves. The GPU machine reaches no network and has none of dew's Debian build dependencies (CLI11,
# cpp-httplib, PCRE2, GoogleTest, gloo's headers), while this machine kind has them and the same CUDA 13
# toolkit; so dew is compiled here, against the same LibTorch release the GPU machine's PyTorch is (2.11.0,
# CUDA 13.0), and runs there against that machine's own LibTorch and GPU:
#
#   bash scripts/gpu_check.sh pack   # here: a CUDA tree (-DDEW_CUDA=ON in build-cuda/) and train_lm_bench, then
#                                    #   .gpu/ (git-ignored): the three binaries and the libraries they load
#                                    #   that are not glibc's, libstdc++'s, LibTorch's or CUDA's
#   bash scripts/gpu_check.sh run    # there, as the device tool's command with carry [".gpu"] and
#                                    #   timeout_s 570: `dew version`, the CUDA tests, the benchmark
#
# `run` prints a short table last and, where the device tool sets OUT, leaves gpu_check.log and bench.jsonl
# there. Environment for `run`: BENCH_BATCH (default 16), BENCH_STEPS (20), BENCH_ROUNDS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PACK=$ROOT/.gpu
BUILD_DIR=${CUDA_BUILD_DIR:-build-cuda}
# The tests that need a GPU (each skips without one), and VersionCommand, which says what dew sees.
GPU_TESTS="VersionCommand.*:ProcessGroupNccl.*:Trainer.RunsOnCudaWithBf16Compute"
# GPT-2 small's shape (124 M parameters with a 50304-token vocabulary), in dew's decoder (RoPE, RMSNorm,
# SwiGLU with the same 3072 hidden features); the same flags go to dew and to the PyTorch peer.
GPT2_SMALL="--vocab 50304 --emb 768 --layers 12 --heads 12 --mlp-features 3072 --seq 1024 --max-seq-len 1024 --dtype bfloat16 --device cuda"

log() { printf '[gpu-check] %s\n' "$*"; }
die() { printf '[gpu-check] error: %s\n' "$*" >&2; exit 1; }

pack() {
  # A tree that is CUDA throughout (not CI's variant of the CPU tree): dew, its tests and the benchmark.
  source scripts/cuda_toolkit.sh
  local cuda_home; cuda_home=$(cuda_toolkit_root)
  [ -n "$cuda_home" ] || die "no CUDA toolkit here (scripts/cuda_toolkit.sh says where it looks)"
  bash scripts/setup.sh >/dev/null
  CUDA_HOME=$cuda_home bash scripts/setup_cuda.sh
  [ -f "$BUILD_DIR/build.ninja" ] || cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEW_CUDA=ON \
    -DCUDAToolkit_ROOT="$cuda_home"
  ninja -C "$BUILD_DIR" -j "${DEW_BUILD_JOBS:-$(nproc)}" dew_cli dew_tests train_lm_bench
  rm -rf "$PACK"
  mkdir -p "$PACK/bin" "$PACK/lib"
  local b
  for b in dew dew_tests train_lm_bench; do
    local from=$BUILD_DIR/bin/$b
    [ -x "$from" ] || from=$BUILD_DIR/tests/$b
    [ -x "$from" ] || die "$b not found in $BUILD_DIR"
    strip -o "$PACK/bin/$b" "$from"
    # What the loader takes from the system's library directories, less what every Linux has (glibc,
    # libstdc++, libgcc) and what the GPU machine's PyTorch brings (LibTorch, CUDA).
    ldd "$from" | awk '$3 ~ /^\/(usr\/)?lib\/x86_64-linux-gnu\// {print $3}' \
      | grep -v -E '/(libc|libm|libdl|libpthread|librt|libutil|libresolv|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so' \
      | while read -r lib; do cp -L -n "$lib" "$PACK/lib/"; done
  done
  local mib; mib=$(du -sm "$PACK" | cut -f1)
  log "packed $PACK: ${mib} MiB ($(ls "$PACK/lib" | tr '\n' ' '))"
  [ "$mib" -le 48 ] || die "$PACK is ${mib} MiB: with the repository it would pass the device tool's 64 MiB"
  log "next: the device tool's run with command 'bash scripts/gpu_check.sh run', carry [\".gpu\"], timeout_s 570"
}

run_check() {
  [ -x "$PACK/bin/dew" ] || die "$PACK/bin/dew is missing: run 'bash scripts/gpu_check.sh pack' here first and carry .gpu"
  local out=${OUT:-$(mktemp -d)}
  exec > >(tee "$out/gpu_check.log") 2>&1
  nvidia-smi -L || die "nvidia-smi sees no GPU"
  local torch_dir
  torch_dir=$(python3 -c 'import os, torch; assert torch.cuda.is_available(); print(os.path.dirname(torch.__file__))') \
    || die "python3's torch does not see a GPU"
  python3 -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name(0))'
  # dew's binaries load that LibTorch (its rpath's directories do not exist there) and, through LibTorch's
  # own rpath, the nvidia-* wheels beside it; .gpu/lib has the rest. Only dew's commands get this path:
  # Python keeps its own OpenSSL.
  local dew_libs
  dew_libs="$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:$PACK/lib"
  dew_env() { env LD_LIBRARY_PATH="$dew_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }

  log "dew version"
  dew_env "$PACK/bin/dew" version
  log "CUDA tests: $GPU_TESTS"
  local status=0
  DEW_BIN=$PACK/bin/dew DEW_FIXTURES=$ROOT/tests/fixtures dew_env timeout 150 "$PACK/bin/dew_tests" \
    --gtest_filter="$GPU_TESTS" --gtest_brief=1 || status=$?
  [ "$status" = 0 ] || log "CUDA tests FAILED (status $status); the benchmark runs anyway"

  local batch=${BENCH_BATCH:-16} steps=${BENCH_STEPS:-20} rounds=${BENCH_ROUNDS:-2} r
  local flags="$GPT2_SMALL --batch $batch --steps $steps --warmup 5"
  log "benchmark: $rounds rounds of dew and PyTorch eager, $flags"
  : > "$out/bench.jsonl"
  for ((r = 0; r < rounds; ++r)); do
    # shellcheck disable=SC2086  # the flags are words
    dew_env timeout 90 "$PACK/bin/train_lm_bench" $flags | tail -n1 >> "$out/bench.jsonl" || log "dew's run failed"
    # shellcheck disable=SC2086
    timeout 90 python3 tools/bench/train_lm_peers.py torch $flags | tail -n1 >> "$out/bench.jsonl" || log "PyTorch's run failed"
  done
  python3 - "$out/bench.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def med(impl, key):
    v = [r[key] for r in rows if r["impl"] == impl and r.get(key) is not None]
    return statistics.median(v) if v else None
dew = next((r for r in rows if r["impl"] == "dew"), None)
if dew:
    c = dew["config"]
    print(f"\nGPT-2-small-class decoder ({dew['parameters'] / 1e6:.0f} M parameters, seq {c['seq']}, batch {c['batch']}, "
          f"{dew['dtype']}) on {dew['device']}; matmul peak dew measured: {dew['peak_flops'] / 1e12:.0f} TFLOP/s")
print(f"{'impl':<10}{'tokens/s':>12}{'step ms':>10}{'MFU':>8}{'loss 1st->last':>18}{'GPU MiB':>10}")
for impl in ("dew", "pytorch"):
    tps = med(impl, "tokens_per_s")
    if tps is None:
        print(f"{impl:<10}{'(no run)':>12}")
        continue
    mfu = f"{dew['flops_per_token'] * tps / dew['peak_flops'] * 100:.1f}%" if dew else "-"
    gpu = med(impl, "peak_device_mib")
    print(f"{impl:<10}{tps:>12.0f}{med(impl, 'step_s') * 1e3:>10.1f}{mfu:>8}"
          f"{med(impl, 'loss_first'):>11.3f}->{med(impl, 'loss_last'):<5.3f}{(f'{gpu:.0f}' if gpu else '-'):>10}")
if med("dew", "tokens_per_s") and med("pytorch", "tokens_per_s"):
    print(f"dew/PyTorch tokens/s: {med('dew', 'tokens_per_s') / med('pytorch', 'tokens_per_s'):.2f}x")
PY
  return "$status"
}

case ${1:-} in
  pack) pack ;;
  run) run_check ;;
  *) die "usage: bash scripts/gpu_check.sh pack|run (pack here, run on the GPU machine)" ;;
esac
