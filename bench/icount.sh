#!/bin/bash
# SPDX-License-Identifier: MIT
# Instructions per zl_send + zl_recv on shm:// (callgrind; exact, load-independent).
#   bench/icount.sh [BUILD_DIR] [SIZE] [BATCH]
# BATCH > 1: per message of zl_sendv batches of BATCH (then BATCH zl_recv).
# Two runs of different length; the difference cancels setup costs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$here/../build}" && pwd)
SIZE=${2:-64} BATCH=${3:-1}
command -v valgrind >/dev/null || { echo "icount: needs valgrind (apt-get install valgrind)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -I"$here/../include" "$here/icount.c" -L"$B" -lzipline -Wl,-rpath,"$B" -lpthread \
	-o "$tmp/icount"
count() {
	valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$tmp/icount" "$1" "$SIZE" "$BATCH" 2>&1 |
		awk '/Collected/ { print $4 }'
}
a=$(count 10000)
b=$(count 20000)
what="zl_send + zl_recv"
[ "$BATCH" -eq 1 ] || what="message (zl_sendv of $BATCH, then zl_recv each)"
echo "shm:// $SIZE B: $(( (b - a) / 10000 )) instructions per $what (callgrind)"
