#!/usr/bin/env bash
# Puts a checkpoint directory into a local Hugging Face Hub cache, laid out as huggingface_hub lays it out,
# so that `dew generate org/name` finds it offline (docs/interop.md, "Hub names and the local cache"):
#
#   CACHE/models--ORG--NAME/blobs/<sha256 of each file>
#   CACHE/models--ORG--NAME/snapshots/COMMIT/<file> -> ../../blobs/<sha256>
#   CACHE/models--ORG--NAME/refs/REF               COMMIT (no newline), for each REF (default: main)
#
# Usage: tools/hub_cache_from_dir.sh DIR CACHE ORG/NAME [COMMIT [REF...]]
#   COMMIT defaults to the sha1 of the directory's file list and contents (40 hex digits, like a git commit).
# Needs only coreutils (sha256sum, sha1sum). The tests build the same layout in C++ (tests/hub_cache_support.h).
set -euo pipefail
if [[ $# -lt 3 ]]; then
  echo "usage: $0 DIR CACHE ORG/NAME [COMMIT [REF...]]" >&2
  exit 2
fi
dir=$1 cache=$2 repo=$3
shift 3
[[ -d $dir ]] || { echo "$0: '$dir' is not a directory" >&2; exit 1; }
[[ $repo =~ ^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || {
  echo "$0: '$repo' is not a Hub name org/name" >&2; exit 1; }
commit=${1:-$(cd "$dir" && find . -maxdepth 1 -type f -print0 | sort -z | xargs -0 sha1sum | sha1sum | cut -c1-40)}
[[ $# -gt 0 ]] && shift
refs=("$@")
[[ ${#refs[@]} -gt 0 ]] || refs=(main)
[[ $commit =~ ^[0-9a-f]{40}$ ]] || { echo "$0: commit '$commit' is not 40 lowercase hex digits" >&2; exit 1; }

root=$cache/models--${repo/\//--}
mkdir -p "$root/blobs" "$root/snapshots/$commit"
for file in "$dir"/*; do
  [[ -f $file ]] || continue
  blob=$(sha256sum "$file" | cut -c1-64)
  [[ -e $root/blobs/$blob ]] || cp "$file" "$root/blobs/$blob"
  ln -sfn "../../blobs/$blob" "$root/snapshots/$commit/$(basename "$file")"
done
for ref in "${refs[@]}"; do
  mkdir -p "$(dirname "$root/refs/$ref")"
  printf '%s' "$commit" > "$root/refs/$ref"
done
echo "$root/snapshots/$commit"
