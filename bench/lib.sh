# What the benchmark drivers (bench/*.sh) share; source it after `cd` to the repository root.
#
#   bench_binary DIR NAME       the path of the bench binary DIR/NAME, built first (ninja -C DIR/..) when
#                               missing and DIR/.. is a Ninja build directory; exits when it cannot be had
#   bench_venv VENV PACKAGES..  makes the peers' venv (Python >= 3.12 when the machine has one: dewml needs
#                               it) and pip-installs the packages when an import of each fails, at the
#                               versions tools/bench/requirements.txt pins (BENCH_REQUIREMENTS, pip -c)
#   wait_quiet [SECONDS]        waits (default 120 s) for the machine to be idle (< 10% busy), prints the
#                               busy percent it started at: on a shared machine another process's burst
#                               slows a 2-thread OpenMP run by far more than its share

# Every package the peers' venv gets, and what those pull in, is held to these exact versions.
BENCH_REQUIREMENTS=${BENCH_REQUIREMENTS:-tools/bench/requirements.txt}

bench_binary() {
  local dir=$1 name=$2
  if [ ! -x "$dir/$name" ]; then
    if [ -f "$dir/../build.ninja" ]; then
      ninja -C "$dir/.." "$name" >/dev/null
    else
      echo "$name: not found in $dir (build it: bash scripts/build.sh, or set BIN_DIR)" >&2
      exit 1
    fi
  fi
  echo "$dir/$name"
}

bench_venv() {
  local venv=$1; shift
  if [ ! -x "$venv/bin/python" ]; then
    local py="" candidate
    for candidate in python3.13 python3.12 "$HOME"/.pyenv/versions/3.1[23]*/bin/python3; do
      if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then
        py=$(command -v "$candidate"); break
      fi
    done
    "${py:-python3}" -m venv "$venv"
  fi
  local package module
  for package in "$@"; do
    module=${package%%[=<>~]*}
    case $module in dewml) module=dew ;; esac
    if ! "$venv/bin/python" -c "import $module" 2>/dev/null; then
      "$venv/bin/python" -m pip install -q -c "$BENCH_REQUIREMENTS" "$package" >&2 || echo "pip install $package failed" >&2
    fi
  done
}

# The busy share of all cores over one second, in percent (from /proc/stat).
busy_percent() {
  local a b
  a=($(head -n1 /proc/stat)); sleep 1; b=($(head -n1 /proc/stat))
  local total=0 idle i
  for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
  idle=$((b[4] - a[4] + b[5] - a[5]))
  echo $(( total > 0 ? 100 * (total - idle) / total : 0 ))
}

wait_quiet() {
  local limit=${1:-120} waited=0 busy
  while busy=$(busy_percent); [ "$busy" -ge 10 ] && [ "$waited" -lt "$limit" ]; do
    waited=$((waited + 1))
  done
  echo "$busy"
}

# dewml_reason VENV PEERS_SCRIPT: pip-installs dewml into VENV when missing (log beside VENV), then prints why
# PEERS_SCRIPT's dewml peer cannot run here, or nothing when it can.
dewml_reason() {
  local venv=$1 script=$2 log reason
  log=$(dirname "$venv")/dewml-install.log
  if ! "$venv/bin/python" -c 'import dew' 2>/dev/null; then
    "$venv/bin/python" -m pip install -q -c "$BENCH_REQUIREMENTS" dewml >"$log" 2>&1 || true
  fi
  reason=$("$venv/bin/python" "$script" probe-dewml |
           "$venv/bin/python" -c 'import json,sys; r=json.load(sys.stdin); print(r["reason"] or "")')
  if [ -z "$reason" ] && ! "$venv/bin/python" -c 'import dew' 2>/dev/null; then
    reason="pip install dewml failed, see $log"
  fi
  echo "$reason"
}
