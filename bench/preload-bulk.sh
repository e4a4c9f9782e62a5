#!/bin/bash
# SPDX-License-Identifier: MIT
# Bulk streams through the preload against kernel TCP, in one run,
# interleaved, with the programs' own floor:
#
#   bench/preload-bulk.sh [BUILD_DIR] [--rounds N] [--bytes B] [--secs S] [--out DIR]
#
# Per round, each plain (kernel TCP over loopback) then with both ends
# under zl-run:
#   socat, one way, B bytes (default 2 GB) from /dev/zero to /dev/null,
#     in socat's default 8 KiB blocks and in 128 KiB blocks (MB/s);
#   iperf3, S seconds (default 3), client to server and back (-R) (Gbit/s,
#     as the receiver counts);
# and once per round the floor: socat copying /dev/zero to /dev/null with
# no socket at all, in both block sizes (what the program itself can do).
# Servers pinned to cpu1, clients to cpu0.
#
# Writes OUT (default BUILD_DIR/preload-bulk): preload-bulk.csv (every
# run: round,program,mode,value,unit), preload-bulk.md (medians over the
# rounds and ratios to the kernel) and preload-bulk.png (gnuplot, if
# installed). Exit 0; 1 if a run failed; 2 usage or a missing program.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../build
case ${1:-} in --* | "") ;; *) build=$1; shift ;; esac
rounds=3 bytes=2000000000 secs=3 out=""
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=$2; shift 2 ;;
	--bytes) bytes=$2; shift 2 ;;
	--secs) secs=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h | --help) sed -n '3,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: $0 [BUILD_DIR] [--rounds N] [--bytes B] [--secs S] [--out DIR]" >&2; exit 2 ;;
	esac
done
case "$rounds$bytes$secs" in "" | *[!0-9]*) echo "preload-bulk: --rounds, --bytes and --secs take numbers" >&2; exit 2 ;; esac
build=$(cd "$build" && pwd) || exit 2
zlrun=$build/tools/zl-run
out=${out:-$build/preload-bulk}
for p in "$zlrun" socat iperf3 taskset; do
	command -v "$p" > /dev/null || { echo "preload-bulk: $p missing (scripts/install-deps.sh)" >&2; exit 2; }
done
mkdir -p "$out" || exit 2
csv=$out/preload-bulk.csv
echo "round,program,mode,value,unit" > "$csv"
fails=0
now() { date +%s%N; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# socat_run ROUND MODE BLOCK: B bytes over TCP (MODE plain or zl)
socat_run() {
	local pre=() port t0 t1 s
	[ "$2" = zl ] && pre=("$zlrun" --)
	port=$(free_port)
	taskset -c 1 "${pre[@]}" socat -u -b "$3" "TCP-LISTEN:$port,reuseaddr" OPEN:/dev/null &
	s=$!
	for _ in $(seq 50); do ss -ltn "sport = :$port" 2>/dev/null | grep -q LISTEN && break; sleep 0.05; done
	t0=$(now)
	if ! taskset -c 0 "${pre[@]}" socat -u -b "$3" "OPEN:/dev/zero,readbytes=$bytes" \
		"TCP:127.0.0.1:$port"; then
		kill "$s" 2>/dev/null
		fails=$((fails + 1))
	fi
	wait "$s" || fails=$((fails + 1))
	t1=$(now)
	echo "$1,socat-$3,$2,$(awk -v b="$bytes" -v t=$((t1 - t0)) 'BEGIN { printf "%.0f", b * 1000 / t }'),MB/s" >> "$csv"
}

# floor_run ROUND BLOCK: socat with no socket
floor_run() {
	local t0 t1
	t0=$(now)
	taskset -c 0 socat -u -b "$2" "OPEN:/dev/zero,readbytes=$bytes" OPEN:/dev/null || fails=$((fails + 1))
	t1=$(now)
	echo "$1,socat-$2,floor,$(awk -v b="$bytes" -v t=$((t1 - t0)) 'BEGIN { printf "%.0f", b * 1000 / t }'),MB/s" >> "$csv"
}

# iperf_run ROUND MODE [-R]
iperf_run() {
	local pre=() port s g name=iperf3${3:+-R}
	[ "$2" = zl ] && pre=("$zlrun" --)
	port=$(free_port)
	taskset -c 1 "${pre[@]}" iperf3 -s -1 -p "$port" > /dev/null 2>&1 &
	s=$!
	for _ in $(seq 50); do ss -ltn "sport = :$port" 2>/dev/null | grep -q LISTEN && break; sleep 0.05; done
	g=$(taskset -c 0 "${pre[@]}" iperf3 -c 127.0.0.1 -p "$port" -t "$secs" -f g ${3:-} 2>&1 |
		awk '/receiver/ { print $(NF-2) }')
	wait "$s"
	if [ -z "$g" ]; then
		fails=$((fails + 1))
		return
	fi
	echo "$1,$name,$2,$g,Gbit/s" >> "$csv"
}

for r in $(seq "$rounds"); do
	echo "== round $r of $rounds"
	for b in 8192 131072; do
		floor_run "$r" "$b"
		socat_run "$r" plain "$b"
		socat_run "$r" zl "$b"
	done
	for d in "" -R; do
		iperf_run "$r" plain $d
		iperf_run "$r" zl $d
	done
done

# medians and ratios
md=$out/preload-bulk.md
awk -F, 'NR > 1 { k = $2 SUBSEP $3; v[k] = v[k] " " $4; u[$2] = $5; p[$2] = 1 }
function med(s,   a, n, i, j, t) {
	n = split(s, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
END {
	print "| program | unit | kernel TCP | zl-run | zl-run / kernel | floor (no socket) | floor / kernel |"
	print "|---|---|---|---|---|---|---|"
	for (q in p) {
		k = med(v[q, "plain"]); z = med(v[q, "zl"]); f = (q, "floor") in v ? med(v[q, "floor"]) : ""
		printf "| %s | %s | %s | %s | %.2f | %s | %s |\n", q, u[q], k, z, k ? z / k : 0,
			f == "" ? "-" : f, f == "" || !k ? "-" : sprintf("%.2f", f / k)
	}
}' "$csv" | sort > "$md.tmp" && { grep '^| program' "$md.tmp"; grep '^|---' "$md.tmp"; grep -v '^| program\|^|---' "$md.tmp"; } > "$md"
rm -f "$md.tmp"
cat "$md"
if command -v gnuplot > /dev/null; then
	awk -F'|' 'NR > 2 { gsub(/ /, "", $2); gsub(/ /, "", $6); print $2, $6 }' "$md" > "$out/ratios.dat"
	gnuplot -e "set terminal png size 800,400; set output '$out/preload-bulk.png';
		set style fill solid; set boxwidth 0.6; set ylabel 'zl-run / kernel TCP';
		set title 'Bulk streams, zl-run over kernel TCP (median of $rounds rounds)';
		set yrange [0:*]; plot '$out/ratios.dat' using 0:2:xtic(1) with boxes notitle" 2>/dev/null
fi
echo "preload-bulk: $csv, $md"
[ $fails -eq 0 ] || { echo "preload-bulk: $fails runs failed" >&2; exit 1; }
