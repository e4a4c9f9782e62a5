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
# Prints per size and order the per-block mean RTT of both and the median
# ratio B/A with its 95% confidence interval, then this build's time over
# REV's from both orders; below 1 means this build is faster.
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
# Each size runs in both orders: where the two builds sit in memory alone
# moves the ratio by up to a few percent (code placement), and the
# geometric mean of the two orders cancels that.
old=$tmp/build/libzipline.so new=$B/libzipline.so
for s in ${SIZES//,/ }; do
	"$B/tools/zl-ab" "$old" "$new" --size "$s" "$@" | tee "$tmp/1"
	"$B/tools/zl-ab" "$new" "$old" --size "$s" "$@" | tee "$tmp/2"
	q1=$(awk '/^B\/A/ { print $5 }' "$tmp/1")
	q2=$(awk '/^B\/A/ { print $5 }' "$tmp/2")
	awk -v a="$q1" -v b="$q2" -v s="$s" 'BEGIN {
		printf "%s B: this build / %s = %.3f (geometric mean of %.3f and 1/%.3f)\n",
			s, "'"$REV"'", sqrt(a / b), a, b }'
done
