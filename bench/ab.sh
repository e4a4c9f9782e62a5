#!/bin/bash
# SPDX-License-Identifier: MIT
# Is this build faster than an earlier one? Builds the library of git
# revision REV in a temporary worktree and runs zl-ab (bench/ab.c): REV's
# library (A) against BUILD_DIR's (B) in the same processes, in
# alternating blocks, so that the host's changes of speed hit both alike.
#
#   bench/ab.sh REV [BUILD_DIR] [SIZES] [-- zl-ab options]
#
# e.g. bench/ab.sh HEAD~1 build 8,64,4096 -- --zerocopy
# Prints per size the per-block mean RTT of A and B and the median ratio
# B/A with its 95% confidence interval; below 1 means B is faster.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
REV=${1:?usage: bench/ab.sh REV [BUILD_DIR] [SIZES] [-- zl-ab options]}
shift
B=$root/build SIZES=64
[ $# -gt 0 ] && [ "$1" != -- ] && { B=$(cd "$1" && pwd); shift; }
[ $# -gt 0 ] && [ "$1" != -- ] && { SIZES=$1; shift; }
[ $# -gt 0 ] && [ "$1" = -- ] && shift
[ -x "$B/tools/zl-ab" ] || { echo "ab: $B/tools/zl-ab missing (make build)"; exit 1; }
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp/src" > /dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git -C "$root" worktree add -q --detach "$tmp/src" "$REV"
echo "ab: building the library of $(git -C "$tmp/src" log --oneline -1 | cut -c1-70)"
cmake -S "$tmp/src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build "$tmp/build" -j"$(nproc)" --target zipline > /dev/null
for s in ${SIZES//,/ }; do
	"$B/tools/zl-ab" "$tmp/build/libzipline.so" "$B/libzipline.so" --size "$s" "$@"
done
