#!/bin/bash
# SPDX-License-Identifier: MIT
# Small messages through the preload against what a user could use
# instead, in one run, interleaved, each side's system calls counted:
#
#   bench/preload-rtt.sh [BUILD_DIR] [--rounds N] [--secs S] [--out DIR]
#
# Per round, in this order:
#   sockperf ping-pong, 64 B over loopback TCP, round trip (RTT, us), its
#     server waiting in each style (-F epoll, poll, select, recvfrom: a
#     blocking read): kernel TCP, then both ends under zl-run;
#   redis-benchmark -c 1 -P 1 GET, 200,000 requests (requests/s and
#     average latency): kernel TCP, a kernel Unix socket, then both ends
#     under zl-run (over TCP);
# servers pinned to cpu1, clients to cpu0. With perf (linux-perf), each
# side's system calls (raw_syscalls:sys_enter over the whole process,
# start-up included) per message (sockperf: per round trip; redis: per
# request).
#
# Writes OUT (default BUILD_DIR/preload-rtt): preload-rtt.csv (every run:
# round,program,mode,median_us,p99_us,p999_us,max_us,rps,server_calls,
# client_calls, per message), preload-rtt.md (medians over the rounds and
# ratios) and preload-rtt.png (gnuplot, if installed). The ring's own floor,
# in each round too: zl-bench pingpong --url shm://NAME --size 64 (program
# ring-floor; the table gives each sockperf style's RTT over it).
# Exit 0; 1 if a run failed; 2 usage or a missing program.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$here/../build
case ${1:-} in --* | "") ;; *) build=$1; shift ;; esac
rounds=3 secs=4 out=""
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=$2; shift 2 ;;
	--secs) secs=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h | --help) sed -n '3,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: $0 [BUILD_DIR] [--rounds N] [--secs S] [--out DIR]" >&2; exit 2 ;;
	esac
done
case "$rounds$secs" in "" | *[!0-9]*) echo "preload-rtt: --rounds and --secs take numbers" >&2; exit 2 ;; esac
build=$(cd "$build" && pwd) || exit 2
zlrun=$build/tools/zl-run
out=${out:-$build/preload-rtt}
zlbench=$build/tools/zl-bench
for p in "$zlrun" "$zlbench" sockperf redis-server redis-benchmark redis-cli; do
	command -v "$p" > /dev/null || { echo "preload-rtt: $p missing (scripts/install-deps.sh)" >&2; exit 2; }
done
mkdir -p "$out" || exit 2
csv=$out/preload-rtt.csv
echo "round,program,mode,median_us,p99_us,p999_us,max_us,rps,server_calls,client_calls" > "$csv"
tmp=$(mktemp -d) || exit 2
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT
counting=0
perf stat -e raw_syscalls:sys_enter true > /dev/null 2>&1 && counting=1
# counted CMD...: run CMD, its system calls into $tmp/$1 (0 without perf)
counted() {
	local f=$tmp/$1; shift
	if [ $counting = 1 ]; then
		perf stat -x, -e raw_syscalls:sys_enter -o "$f" -- "$@"
	else
		echo "0,,raw_syscalls:sys_enter" > "$f"; "$@"
	fi
}
calls() { awk -F, '/raw_syscalls/ { print $1 }' "$tmp/$1"; }
per() { awk -v c="$1" -v n="$2" 'BEGIN { printf "%.4f", (n > 0 ? c / n : 0) }'; }
port() { echo $((20000 + (RANDOM % 20000))); }
# reap PID, a server told to stop: at most 10 s, then SIGKILL
reap() {
	for _ in $(seq 100); do kill -0 "$1" 2> /dev/null || break; sleep 0.1; done
	kill -9 "$1" 2> /dev/null
	wait "$1" 2> /dev/null
}
failed=0

sockperf_run() { # round mode style
	local pre=() p; p=$(port)
	[ "$2" = zl ] && pre=("$zlrun" --)
	echo "T:127.0.0.1:$p" > "$tmp/feed" # (-F takes its sockets from a file)
	ZL_LOG=warn counted srv "${pre[@]}" taskset -c 1 sockperf server -f "$tmp/feed" -F "$3" \
		> /dev/null 2>&1 &
	local spid=$!
	sleep 1
	ZL_LOG=warn counted cli "${pre[@]}" taskset -c 0 sockperf ping-pong --tcp -i 127.0.0.1 -p "$p" \
		-t "$secs" -m 64 --full-rtt > "$tmp/sp.out" 2>&1
	pkill -INT -f "sockperf server -f $tmp/feed -F $3\$"; reap "$spid"
	local med p99 p999 max n
	med=$(awk '/percentile 50.000/ { print $NF }' "$tmp/sp.out")
	p99=$(awk '/percentile 99.000/ { print $NF }' "$tmp/sp.out")
	p999=$(awk '/percentile 99.900/ { print $NF }' "$tmp/sp.out")
	max=$(awk '/<MAX> observation/ { print $NF }' "$tmp/sp.out")
	n=$(sed -n 's/.*SentMessages=\([0-9]*\).*/\1/p' "$tmp/sp.out" | head -1)
	if [ -z "$med" ] || [ -z "$n" ]; then
		echo "preload-rtt: sockperf $3 $2 failed" >&2; failed=1; return
	fi
	echo "$1,sockperf-64B-$3,$2,$med,$p99,$p999,$max,,$(per "$(calls srv)" "$n"),$(per "$(calls cli)" "$n")" >> "$csv"
}

redis_run() { # round mode
	local pre=() p d tgt; p=$(port); d=$tmp/redis; mkdir -p "$d"
	[ "$2" = zl ] && pre=("$zlrun" --)
	tgt=(-p "$p"); [ "$2" = unix ] && tgt=(-s "$d/r.sock")
	ZL_LOG=warn counted srv "${pre[@]}" taskset -c 1 redis-server --port "$p" --unixsocket "$d/r.sock" \
		--save '' --appendonly no --dir "$d" > /dev/null 2>&1 &
	local spid=$!
	sleep 1
	ZL_LOG=warn counted cli "${pre[@]}" taskset -c 0 redis-benchmark "${tgt[@]}" -c 1 -P 1 \
		-n 200000 -t get > "$tmp/rb.out" 2>&1
	redis-cli -p "$p" shutdown nosave > /dev/null 2>&1; reap "$spid"
	local rps avg
	rps=$(awk '/throughput summary/ { print $3 }' "$tmp/rb.out")
	avg=$(awk '/latency summary/ { getline; getline; print $1 * 1000 }' "$tmp/rb.out")
	if [ -z "$rps" ]; then
		echo "preload-rtt: redis $2 failed" >&2; failed=1; return
	fi
	echo "$1,redis-c1-get,$2,$avg,,,,$rps,$(per "$(calls srv)" 200000),$(per "$(calls cli)" 200000)" >> "$csv"
}

floor_run() { # round: the bare ring, 64 B round trips (pinned as above)
	"$zlbench" pingpong --url "shm://zlrtt$$" --size 64 > "$tmp/floor.out" 2>&1
	local med p99 p999 max
	read -r med p99 p999 max < <(awk '$1 == 64 && NF >= 5 { print $2, $3, $4, $5 }' "$tmp/floor.out")
	if [ -z "${med:-}" ]; then
		echo "preload-rtt: zl-bench pingpong failed" >&2; failed=1; return
	fi
	echo "$1,ring-floor,zl,$med,$p99,$p999,$max,,," >> "$csv"
}

for r in $(seq 1 "$rounds"); do
	floor_run "$r"
	for st in epoll poll select recvfrom; do
		for m in kernel zl; do sockperf_run "$r" "$m" "$st"; done
	done
	for m in kernel unix zl; do redis_run "$r" "$m"; done
done

# the medians over the rounds, and the ratios against the kernel's paths
python3 - "$csv" "$out/preload-rtt.md" "$counting" << 'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def med(prog, mode, col):
    v = [float(r[col]) for r in rows if r['program'] == prog and r['mode'] == mode and r[col]]
    return statistics.median(v) if v else float('nan')
out = ["| program | mode | median | server calls/msg | client calls/msg |", "|---|---|---|---|---|"]
styles = ("epoll", "poll", "select", "recvfrom")
for prog, col, unit in tuple((f"sockperf-64B-{s}", "median_us", "us RTT") for s in styles) + (("redis-c1-get", "rps", "req/s"),):
    for mode in ("kernel", "unix", "zl"):
        if not any(r['program'] == prog and r['mode'] == mode for r in rows):
            continue
        out.append(f"| {prog} | {mode} | {med(prog, mode, col):.3f} {unit} | "
                   f"{med(prog, mode, 'server_calls'):.4f} | {med(prog, mode, 'client_calls'):.4f} |")
out.append("")
for s in styles:
    p = f"sockperf-64B-{s}"
    out.append(f"sockperf RTT ({s} server): zl {med(p, 'kernel', 'median_us') / med(p, 'zl', 'median_us'):.1f}x faster than kernel TCP, "
               f"{med(p, 'zl', 'median_us') / med('ring-floor', 'zl', 'median_us'):.2f}x the ring's own round trip "
               f"({med('ring-floor', 'zl', 'median_us'):.2f} us, zl-bench pingpong shm 64 B)")
for base in ("kernel", "unix"):
    out.append(f"redis -c1 GET: zl {med('redis-c1-get', 'zl', 'rps') / med('redis-c1-get', base, 'rps'):.1f}x {base}")
if sys.argv[3] != "1":
    out.append("(no perf here: system calls not counted)")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
EOF
if command -v gnuplot > /dev/null; then
	awk -F, 'NR > 1 && $2 == "sockperf-64B-epoll" { print $1, $3, $4 }' "$csv" > "$tmp/sp.dat"
	gnuplot -e "set terminal png size 800,500; set output '$out/preload-rtt.png';
		set title 'sockperf ping-pong, 64 B, epoll server, median RTT per round (us)'; set xlabel 'round';
		set ylabel 'us'; set logscale y;
		plot '< grep kernel $tmp/sp.dat' using 1:3 with linespoints title 'kernel TCP',
		     '< grep zl $tmp/sp.dat' using 1:3 with linespoints title 'zl-run'" 2> /dev/null
fi
echo "(every run: $csv)"
exit $failed
