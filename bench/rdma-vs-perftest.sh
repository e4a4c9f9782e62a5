#!/bin/bash
# SPDX-License-Identifier: MIT
# Our rdma:// ping-pong against perftest's ib_write_lat on the same Soft-RoCE
# device pair, in ONE boot of the VM (tests/vm/rdma-vm.sh), at the same sizes.
#
#   [METHODS=single,split,split2] bench/rdma-vs-perftest.sh [BUILD_DIR] [ITERS] [SIZES] [ROUNDS]
#
# ib_write_lat reports half a round trip; we double it and say so. Everything
# here is emulated (qemu TCG + rxe): compare the ratios, not the microseconds.
# The emulator's speed drifts within a boot, so the whole set is measured
# ROUNDS times (default 3), each round side by side, and the summary gives
# the median over rounds of each round's ratio with a 95% confidence
# interval: one round's ratio swings by tens of percent in the emulator, so
# tell a 10% difference only from the interval of many short rounds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$here/../build}" && pwd)
ITERS=${2:-3000}
SIZES=${3:-8 64 512 4096}
ROUNDS=${4:-3}
METHODS=${METHODS:-single,split,split2}
METHODS=${METHODS//,/ }

if [ -z "${ZL_RDMA_IP_A:-}" ]; then # on the host: boot the VM and rerun inside
	cp "$0" "$B/rdma-vs-perftest.sh"
	ZL_VM_ENV="${ZL_VM_ENV:-} METHODS=${METHODS// /,}" \
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
echo "perftest = 2 x ib_write_lat (it reports half a round trip). perftest2 is a second,"
echo "identical perftest run: perftest2/perftest shows how far two runs of the same thing"
echo "differ here. ptwire is perftest writing as many bytes as one of our records"
echo "(size + 24: the header and footer words): the same WRITE on the wire."
echo "The order of the runs rotates from round to round."
# one run of method m at size s -> "median p99"
run() {
	case $1 in
	ptwire) perftest "$(($2 + 24 + (8 - $2 % 8) % 8))" ;;
	perftest*) perftest "$2" ;;
	*) ours "$2" "$1" ;;
	esac
}
all=(perftest perftest2 ptwire $METHODS)
n=${#all[@]}
for r in $(seq "$ROUNDS"); do
	echo "round $r of $ROUNDS"
	head="$(printf "%6s" size)" tail=""
	for m in "${all[@]}"; do
		head="$head$(printf "  %15s" "$m")"
		[ "$m" = perftest ] || tail="$tail$(printf "  %10s" "${m:0:7}/pt")"
	done
	echo "$head$tail"
	for s in $SIZES; do
		declare -A med=() p99=()
		for k in $(seq 0 $((n - 1))); do
			m=${all[$(((k + r) % n))]}
			read -r med[$m] p99[$m] <<< "$(run "$m" "$s")"
			echo "$r,$m,$s,${med[$m]},${p99[$m]}" >> "$csv"
		done
		line="$(printf "%6s" "$s")" tail=""
		for m in "${all[@]}"; do
			line="$line$(printf "  %7s/%-7s" "${med[$m]}" "${p99[$m]}")"
			[ "$m" = perftest ] ||
				tail="$tail$(awk -v a="${med[$m]}" -v b="${med[perftest]}" \
					'BEGIN { printf "  %10.2f", a / b }')"
		done
		echo "$line$tail"
	done
done
echo
echo "Summary over $ROUNDS rounds: median of the per-round ratios of medians, with a"
echo "distribution-free 95% confidence interval of that median (order statistics)"
pairs="perftest2/perftest ptwire/perftest"
for m in $METHODS; do pairs="$pairs $m/perftest $m/ptwire"; done
awk -F, -v pairs="$pairs" 'NR > 1 && $4 ~ /^[0-9.]+$/ { v[$1 "," $3 "," $2] = $4; sz[$3] = 1; rd[$1] = 1 }
function sort(a, n,   i, j, t) {
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
}
END {
	np = split(pairs, p, " ")
	for (s in sz) for (k = 1; k <= np; k++) {
		split(p[k], nd, "/")
		n = 0
		for (r in rd) if (v[r "," s "," nd[2]] > 0 && v[r "," s "," nd[1]] > 0)
			a[++n] = v[r "," s "," nd[1]] / v[r "," s "," nd[2]]
		if (!n) continue
		sort(a, n)
		med = n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
		# ranks of a 95% interval for the median: n/2 -+ 1.96 sqrt(n)/2
		for (q = n, i = 0; i < 40; i++) q = (q + n / q) / 2 # sqrt: the guest awk has no math
		lo = int(n / 2 - 0.98 * q); hi = int(n / 2 + 1 + 0.98 * q + 0.999)
		ci = lo >= 1 && hi <= n ? sprintf("%.2f-%.2f", a[lo], a[hi]) : "too few rounds"
		printf "%6s B  %-18s %6.2f   95%% CI %-12s range %.2f-%.2f  (%d rounds)\n", s, p[k], med,
			ci, a[1], a[n], n
	}
}' "$csv" | sort -n -s
echo "CSV: $csv"
