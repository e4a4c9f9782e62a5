#!/bin/bash
# SPDX-License-Identifier: MIT
# shm streaming against the bare copying ring (the target "at least 0.8x
# zl-bench spsc --stream at every size"), in alternating pairs:
#
#   bench/stream-pairs.sh [BUILD_DIR] [SIZE] [PAIRS]
#
# This VM's host moves its two vCPUs between placements, and the floor
# itself moves 4x with them (4 KiB: 0.5 M to 9.4 M messages/s seen), so
# only a ratio between two runs taken back to back means anything. Each
# pair is one `zl-bench spsc --stream` run and one `zl-bench stream` run
# over shm://, 1,000,000 messages each (every message checked); printed per
# pair, then the median ratio and the pairs at or above 0.8.
# CSV: BUILD_DIR/stream-pairs-SIZE.csv (pair,size,floor,shm,ratio; messages/s).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$here/../build}" && pwd)
SIZE=${2:-4k} PAIRS=${3:-12}
bench=$B/tools/zl-bench csv=$B/stream-pairs-$SIZE.csv
# the msgs/s median of a result line, in messages/s ("2.31 M" -> 2310000)
rate() { tail -1 | awk '{ for (i = 1; i < NF; i++) if ($i ~ /^[0-9.]+$/ && $(i + 1) ~ /^[kM]?$|^\[/) {
	if ($(i + 1) == "M") print $i * 1e6; else if ($(i + 1) == "k") print $i * 1e3; else print $i; exit } }'; }
echo "pair,size,floor,shm,ratio" > "$csv"
for i in $(seq 1 "$PAIRS"); do
	f=$("$bench" spsc --stream --size "$SIZE" --bytes 4g --iters 1000000 --runs 1 | rate)
	s=$("$bench" stream --url "shm://zl-pairs-$$-$i" --size "$SIZE" --bytes 4g \
		--iters 1000000 --runs 1 | rate)
	r=$(awk -v s="$s" -v f="$f" 'BEGIN { printf "%.3f", (f > 0 ? s / f : 0) }')
	printf 'pair %2d: floor %10.0f  shm %10.0f  shm/floor %s\n' "$i" "$f" "$s" "$r"
	echo "$i,$SIZE,$f,$s,$r" >> "$csv"
done
tail -n +2 "$csv" | cut -d, -f5 | sort -n | awk '{ r[++n] = $1; if ($1 >= 0.8) ok++ }
	END { m = n % 2 ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
		printf "median shm/floor %.3f over %d pairs (min %.3f, max %.3f); %d of %d at or above 0.8\n",
			m, n, r[1], r[n], ok, n }'
echo "CSV: $csv"
