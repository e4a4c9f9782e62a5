#!/bin/bash
# SPDX-License-Identifier: MIT
# Our rdma:// ping-pong against perftest's ib_write_lat on the same Soft-RoCE
# device pair, in ONE boot of the VM (tests/vm/rdma-vm.sh), at the same sizes.
#
#   bench/rdma-vs-perftest.sh [BUILD_DIR] [ITERS] [SIZES] [ROUNDS]
#
# ib_write_lat reports half a round trip; we double it and say so. Everything
# here is emulated (qemu TCG + rxe): compare the ratios, not the microseconds.
# The emulator's speed drifts within a boot, so the whole set is measured
# ROUNDS times (default 3), each round side by side, and the summary gives
# the median over rounds of each round's ratio.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$here/../build}" && pwd)
ITERS=${2:-3000}
SIZES=${3:-8 64 512 4096}
ROUNDS=${4:-3}

if [ -z "${ZL_RDMA_IP_A:-}" ]; then # on the host: boot the VM and rerun inside
	cp "$0" "$B/rdma-vs-perftest.sh"
	exec "$here/../tests/vm/rdma-vm.sh" --timeout 1500 --share "$B" -- \
		"$B/rdma-vs-perftest.sh" "$B" "$ITERS" "$SIZES" "$ROUNDS"
fi

zb=$B/tools/zl-bench
csv=$B/rdma-vs-perftest.csv
echo "round,method,size,rtt_median_us,rtt_p99_us" > "$csv"
SRV=$ZL_RDMA_IP_B

# perftest: server on rxe1 (cpu1) first, client on rxe0 (cpu0) a second later.
perftest() { # size -> "median p99" RTT in us (doubled from half-RTT)
	local s=$1 out p=$((7000 + RANDOM % 2000))
	taskset -c 1 ib_write_lat -d "$ZL_RDMA_DEV_B" -x 1 -F -s "$s" -n "$ITERS" -p "$p" \
		> /tmp/pt_srv.log 2>&1 &
	sleep 1
	out=$(taskset -c 0 ib_write_lat -d "$ZL_RDMA_DEV_A" -x 1 -F -s "$s" -n "$ITERS" \
		-p "$p" "$ZL_RDMA_IP_B" 2>&1) || { echo "$out" >&2; return 1; }
	wait
	# columns: bytes iters t_min t_max t_typical t_avg t_stdev 99% 99.9%
	echo "$out" | awk -v s="$s" '$1 == s && NF >= 8 { printf "%.2f %.2f\n", 2 * $5, 2 * $8 }'
}

# Ours in the same places: server on rxe1 (cpu1), client on rxe0 (cpu0).
ours() { # size order -> "median p99" RTT in us
	local s=$1 order=$2 p=$((9000 + RANDOM % 2000)) q
	q="order=$order&spin_us=-1"
	"$zb" pingpong --server --pin 1 --timeout 60 \
		--url "rdma://$SRV:$p?dev=$ZL_RDMA_DEV_B&$q" > /tmp/zb_srv.log 2>&1 &
	sleep 0.5
	# --timer tsc: TCG has no invariant TSC, and the clock_gettime fallback
	# (HPET, a syscall) would sit between our round trips; perftest uses rdtsc
	"$zb" pingpong --client --pin 0 --timeout 60 --timer tsc --size "$s" --iters "$ITERS" \
		--warmup $((ITERS / 5)) --csv /tmp/zb.csv \
		--url "rdma://$SRV:$p?dev=$ZL_RDMA_DEV_A&$q" > /tmp/zb_cli.log 2>&1 ||
		{ cat /tmp/zb_cli.log /tmp/zb_srv.log >&2; return 1; }
	wait
	# transport,url,size,iters,median_us,p99_us,...
	tail -1 /tmp/zb.csv | awk -F, '{ printf "%.2f %.2f\n", $5, $6 }'
}

# Warm up: TCG translates hot paths on first use.
perftest 64 > /dev/null
ours 64 split > /dev/null

echo "RTT in microseconds, median / p99, emulated (qemu TCG + Soft-RoCE rxe0 -> rxe1)."
echo "perftest = 2 x ib_write_lat (it reports half a round trip)."
for r in $(seq "$ROUNDS"); do
	echo "round $r of $ROUNDS"
	printf "%6s  %15s  %15s  %15s  %15s  %10s  %10s  %10s\n" size perftest single split \
		split2 single/pt split/pt split2/pt
	for s in $SIZES; do
		read -r pm pp <<< "$(perftest "$s")"
		read -r sm sp <<< "$(ours "$s" single)"
		read -r xm xp <<< "$(ours "$s" split)"
		read -r ym yp <<< "$(ours "$s" split2)"
		ratio() { awk -v a="$1" -v b="$pm" 'BEGIN { printf "%.2f", a / b }'; }
		printf "%6s  %7s/%-7s  %7s/%-7s  %7s/%-7s  %7s/%-7s  %10s  %10s  %10s\n" "$s" "$pm" \
			"$pp" "$sm" "$sp" "$xm" "$xp" "$ym" "$yp" "$(ratio "$sm")" "$(ratio "$xm")" \
			"$(ratio "$ym")"
		printf "%s,perftest,%s,%s,%s\n%s,single,%s,%s,%s\n%s,split,%s,%s,%s\n%s,split2,%s,%s,%s\n" \
			"$r" "$s" "$pm" "$pp" "$r" "$s" "$sm" "$sp" "$r" "$s" "$xm" "$xp" "$r" "$s" "$ym" \
			"$yp" >> "$csv"
	done
done
echo
echo "Summary over $ROUNDS rounds: median of the per-round ratios of medians (ours / perftest)"
awk -F, 'NR > 1 { v[$1 "," $3 "," $2] = $4; sz[$3] = 1; rd[$1] = 1 }
function med(a, n,   i, j, t) {
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
END {
	printf "%6s  %8s  %8s  %8s   (range over rounds)\n", "size", "single", "split", "split2"
	for (s in sz) {
		line = sprintf("%6s", s); rng = ""
		split("single split split2", m, " ")
		for (k = 1; k <= 3; k++) {
			n = 0; lo = 1e9; hi = 0
			for (r in rd) if (v[r "," s ",perftest"] > 0 && v[r "," s "," m[k]] > 0) {
				x = v[r "," s "," m[k]] / v[r "," s ",perftest"]; a[++n] = x
				if (x < lo) lo = x; if (x > hi) hi = x
			}
			line = line sprintf("  %8.2f", n ? med(a, n) : 0)
			rng = rng sprintf(" %s %.2f-%.2f", m[k], lo, hi)
		}
		print line "  " rng
	}
}' "$csv" | sort -n
echo "CSV: $csv"
