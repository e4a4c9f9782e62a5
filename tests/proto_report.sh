#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/protocols.sh --report on made-up CSVs: each verdict must follow the
# numbers (reproduced, not reproduced, not measured), the experiments'
# rounds must be folded (the lowest median), and failed runs listed.
# usage: proto_report.sh SOURCE_DIR
set -u
src=${1:?usage: proto_report.sh SOURCE_DIR}
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail=0
hdr="mode,proto,pattern,N,P,Q,S,R,L,V,variant,x,nodes,qps,seconds,msgs,msgs_per_s,gbps,gbps_per_node,p50_us,p99_us,p999_us,max_us,clock,label"
row() { # pattern proto N S R V gbps
	echo "proto,$2,$1,$3,0,0,$4,$5,36,$6,-,0,$3,1,1.000,1000,1000.0,$7,$7,10,20,30,40,clock_gettime,"
}
vrow() { # mode variant x p50 p999 rate
	echo "$1,-,-,2,1,1,1,1,0,64,$2,$3,2,1,0.1,100,$6,0.1,0.1,$4,$4,$5,$5,clock_gettime,"
}
{
	echo "$hdr"
	for pr in send-send send-write write-send write-write; do
		row M:1 "$pr" 4 1 16 365 0.030
		row M:M "$pr" 4 1 16 365 0.030
	done
	row M:1 read 4 1 16 365 0.090   # READ best in M:1
	row M:M read 4 1 16 365 0.010   # ... but worst in M:M
	# 1:M: only two protocols measured: the verdict must still be computed
	row 1:M write-write 4 1 16 365 0.05
	row 1:M read 4 1 16 365 0.01
	# vertical: READ S=4 below S=1 in M:1 only; M:M S=4 missing
	row M:1 read 4 4 16 365 0.050
} > "$t/proto.csv"
{
	echo "$hdr"
	# write-poll is fastest in round 2; round 1 hit a slow spell
	for x in 16 64; do
		vrow notify write-poll "$x" 8000 9000 100
		vrow notify write-imm "$x" 40 90 100
		vrow notify send-recv "$x" 45 90 100
		vrow notify write-poll "$x" 30 80 100
	done
	vrow recvpost one-by-one 1 40 500 100
	vrow recvpost aggregated 16 40 200 100
} > "$t/verbs.csv"
echo "read M:1 N=2 S=1 R=1 V=365: exit 1" > "$t/failed.txt"
"$src/bench/protocols.sh" --report "$t" "$t/out" > "$t/log" 2>&1 || { cat "$t/log"; fail=1; }
md=$t/out/protocols.md
want() { # a line of the report that must be there (fixed string)
	grep -qF -- "$1" "$md" || { echo "missing in the report: $1"; fail=1; }
}
want "| M:1: READ gives the highest bandwidth (lesson 1, fig. 8) | best read; send-send 0.0300, send-write 0.0300, write-send 0.0300, write-write 0.0300, read 0.0900 | **reproduced** |"
want "| M:M: READ gives the highest bandwidth (lesson 1, fig. 12a) | best send-send;"
want "read 0.0100 | **not reproduced** |"
want "| 1:M: a protocol responding by WRITE is best and READ is worst (lesson 1, fig. 10) | best write-write, worst read;"
want "| M:1: no vertical scaling; READ with more threads is below one thread (lesson 3, fig. 8b) | READ S=4 / S=1 = 0.56 | **reproduced** |"
want "| M:M: no vertical scaling; READ with more threads is below one thread (lesson 3, fig. 12b) | READ S=4 / S=1 = 0.00 | not measured"
want "| WRITE + memory polling beats WRITE_WITH_IMM and SEND/RECV, which wait for a receive completion (seed 000 fig. 3.4) | write-poll fastest at 2 of 2 sizes | **reproduced** |"
want "| aggregated receive posting lowers the outliers (seed 003 fig. 20) | p99.9 one by one 500, aggregated 200 | **reproduced** |"
want "    read M:1 N=2 S=1 R=1 V=365: exit 1"
want "the highest bandwidth measured here, 0.090 Gbit/s"
grep -q "^16 0.030$" "$t/out/m1-R-send-send.dat" ||
	{ echo "m1-R-send-send.dat:"; cat "$t/out/m1-R-send-send.dat"; fail=1; }
grep -q "^16 30 " "$t/out/v-notify-write-poll.dat" || { echo "rounds not folded:"; cat "$t/out/v-notify-write-poll.dat"; fail=1; }
# three runs of one point: the report takes the median (0.05 of 0.09,
# 0.05, 0.02), not the last or the mean
mkdir -p "$t/r2" "$t/r3"
for r in 2 3; do
	{
		echo "$hdr"
		for pr in send-send send-write write-send write-write; do row M:1 "$pr" 4 1 16 365 0.030; done
		row M:1 read 4 1 16 365 "$([ $r = 2 ] && echo 0.050 || echo 0.020)"
	} > "$t/r$r/proto.csv"
done
"$src/bench/protocols.sh" --report "$t" "$t/r2" "$t/r3" "$t/out3" > "$t/log3" 2>&1 || { cat "$t/log3"; fail=1; }
grep -qF "best read; send-send 0.0300, send-write 0.0300, write-send 0.0300, write-write 0.0300, read 0.0500 | **reproduced** |" \
	"$t/out3/protocols.md" || { echo "three runs not folded to the median:"; grep "M:1: READ" "$t/out3/protocols.md"; fail=1; }
grep -qF "Runs: 3" "$t/out3/protocols.md" || { echo "the report does not say it merged 3 runs"; fail=1; }
if [ $fail -ne 0 ]; then
	echo "--- report:"
	cat "$md"
	exit 1
fi
echo "proto_report: OK"
