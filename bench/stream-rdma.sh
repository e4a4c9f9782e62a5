#!/bin/bash
# SPDX-License-Identifier: MIT
# One-way streaming over rdma:// against perftest's ib_write_bw on the same
# Soft-RoCE device pair, in ONE boot of the VM (tests/vm/rdma-vm.sh),
# interleaved (issue 18's rdma row of zl-bench stream-compare):
#
#   bench/stream-rdma.sh [BUILD_DIR] [ROUNDS] [SIZES]
#
#   zipline   zl-bench stream, sender on rxe0 / cpu0, receiver (--server)
#             on rxe1 / cpu1, order=single and order=split, single with
#             --zerocopy (written into the ring's staging copy, checked in
#             place by the receiver: no copy out), and single and split
#             with --batch 16 (zl_sendv: one ibv_post_send per 16
#             messages, adjacent records in one WRITE); every message checked
#   perftest  ib_write_bw at the same size (its RDMA WRITEs carry no
#             framing and nobody reads them: the ceiling)
#
# Each round runs every method once per size, in a rotated order; the
# summary is the median over rounds of messages/s and GB/s, and each
# zipline order's ratio to ib_write_bw (the issue's target: at least 0.8 at
# 64 KiB). Emulated (qemu TCG + rxe): ratios, not absolute figures.
# CSV: BUILD_DIR/stream-rdma.csv; PNG (on the host, with gnuplot):
# BUILD_DIR/stream-rdma.png.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$here/../build}" && pwd)
ROUNDS=${2:-3} SIZES=${3:-64 4096 65536}
csv=$B/stream-rdma.csv
methods=(ib_write_bw single split single-zc single-b16 split-b16)

summary() {
	echo "one-way streaming over rdma (emulated: qemu TCG + Soft-RoCE rxe0 -> rxe1),"
	echo "median of $ROUNDS interleaved rounds; ratio = messages/s against ib_write_bw"
	printf '%-10s %7s %12s %9s %7s\n' method size msgs/s GB/s ratio
	awk -F, 'NR > 1 { k = $2 "," $3; m[k] = m[k] " " $4; g[k] = g[k] " " $5; sz[$3] = 1 }
		function med(s,   a, n, i, j, t) { n = split(s, a, " ")
			for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
				if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
			return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
		END { n = split(METHODS, M, " ")
			for (s in sz) for (i = 1; i <= n; i++) { k = M[i] "," s
				if (!(k in m)) continue
				base = med(m["ib_write_bw," s]); x = med(m[k])
				r = (base > 0) ? x / base : 0
				printf "%-10s %7d %12.0f %9.3f %6.2fx\n", M[i], s, x, med(g[k]), r
				printf "%s %d %.4f\n", M[i], s, med(g[k]) > plot } }' \
		plot="$B/stream-rdma.dat" METHODS="${methods[*]}" "$csv" | sort -k2,2n -k1,1
	echo "CSV: $csv"
	command -v gnuplot >/dev/null || { echo "(no gnuplot: no PNG)"; return 0; }
	gnuplot <<-EOF && echo "PNG: $B/stream-rdma.png"
	set terminal pngcairo size 800,480
	set output "$B/stream-rdma.png"
	set title "one-way streaming over emulated rdma (Soft-RoCE), median of $ROUNDS rounds"
	set xlabel "message size (bytes)"
	set ylabel "GB/s"
	set logscale x 2
	set key left top
	plot for [m in "${methods[*]}"] "< grep '^".m." ' $B/stream-rdma.dat" \
		using 2:3 with linespoints title m
	EOF
}

if [ -z "${ZL_RDMA_IP_A:-}" ]; then # on the host: boot the VM, measure, sum up
	cp "$0" "$B/stream-rdma.sh"
	ZL_VM_EXTRA="${ZL_VM_EXTRA:-} $B/tools/zl-bench" \
		"$here/../tests/vm/rdma-vm.sh" --timeout 2400 --share "$B" -- \
		"$B/stream-rdma.sh" "$B" "$ROUNDS" "$SIZES" || exit 1
	summary
	exit 0
fi

zb=$B/tools/zl-bench
echo "round,method,size,msgs_per_s,gb_per_s" >"$csv"

# zipline ORDER SIZE [--zerocopy] -> "msgs/s GB/s" (20000 messages, or 64 MB)
zipline() {
	local p=$((7400 + RANDOM % 500)) srv log=/tmp/srv.log q
	q="--size $2 --iters 20000 --bytes 64m --runs 1 --timeout 120 ${3:-}"
	# shellcheck disable=SC2086 # $q is a list of options
	"$zb" stream --server --pin 1 $q --url "rdma://$ZL_RDMA_IP_B:$p?dev=$ZL_RDMA_DEV_B&order=$1" \
		>"$log" 2>&1 &
	srv=$!
	for _ in $(seq 100); do grep -qs "receiving on" "$log" && break; sleep 0.2; done
	grep -qs "receiving on" "$log" || { cat "$log" >&2; kill "$srv"; return 1; }
	# shellcheck disable=SC2086
	timeout 300 "$zb" stream --client --pin 0 $q --csv /tmp/zs.csv \
		--url "rdma://$ZL_RDMA_IP_B:$p?dev=$ZL_RDMA_DEV_A&order=$1" >/tmp/cli.log 2>&1 ||
		{ cat /tmp/cli.log "$log" >&2; kill "$srv"; return 1; }
	wait "$srv" || { cat "$log" >&2; return 1; }
	tail -n 1 /tmp/zs.csv | awk -F, '{ print $8, $9 }'
	rm -f /tmp/zs.csv
}

# ib_write_bw SIZE -> "msgs/s GB/s"
perftest() {
	local p=$((7000 + RANDOM % 2000)) srv out
	taskset -c 1 timeout 120 ib_write_bw -d "$ZL_RDMA_DEV_B" -x 1 -F -s "$1" -n 20000 -p "$p" \
		>/dev/null 2>&1 &
	srv=$!
	sleep 1
	# columns: bytes iters BW_peak BW_average[MB/s] MsgRate[Mpps]
	out=$(taskset -c 0 timeout 120 ib_write_bw -d "$ZL_RDMA_DEV_A" -x 1 -F -s "$1" -n 20000 \
		-p "$p" "$ZL_RDMA_IP_B" 2>&1)
	wait "$srv"
	awk -v s="$1" '$1 == s && NF >= 5 { printf "%.0f %.4f\n", $5 * 1e6, $4 * 1.048576e6 / 1e9
		found = 1 } END { exit !found }' <<<"$out" || { echo "$out" >&2; return 1; }
}

# method -> zipline's order and options
opts() {
	case $1 in
	single-zc) echo "single --zerocopy" ;;
	*-b16) echo "${1%-b16} --batch 16" ;;
	*) echo "$1" ;;
	esac
}
for r in $(seq "$ROUNDS"); do
	for s in $SIZES; do
		for k in $(seq 0 $((${#methods[@]} - 1))); do
			m=${methods[$(((k + r) % ${#methods[@]}))]}
			# shellcheck disable=SC2046 # the order, then its options
			set -- $(opts "$m")
			o=$1
			shift
			if [ "$m" = ib_write_bw ]; then
				out=$(perftest "$s")
			else
				out=$(zipline "$o" "$s" "$*")
			fi
			if [ -z "$out" ] && [ "$m" != ib_write_bw ]; then # once more, said
				echo "stream-rdma: $m $s B failed (above); once more on another port" >&2
				out=$(zipline "$o" "$s" "$*")
			fi
			[ -n "$out" ] || exit 1
			echo "$r,$m,$s,${out/ /,}" >>"$csv"
		done
	done
	echo "round $r of $ROUNDS done" >&2
done
