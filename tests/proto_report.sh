#!/bin/bash
# SPDX-License-Identifier: MIT
# bench/protocols.sh --report on made-up CSVs: each verdict must follow the
# numbers of every round (reproduced, not reproduced, inconclusive when the
# rounds disagree, not measured), each point's range over the rounds shown,
# the experiments' rounds told apart for the verdicts and folded for the
# plots (the lowest median), and failed runs listed.
# usage: proto_report.sh SOURCE_DIR
set -u
src=${1:?usage: proto_report.sh SOURCE_DIR}
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail=0
hdr="mode,proto,pattern,N,P,Q,S,R,L,V,variant,x,nodes,qps,seconds,msgs,msgs_per_s,gbps,gbps_per_node,p50_us,p99_us,p999_us,max_us,clock,label"
row() { # pattern proto N S R V gbps [round label]
	echo "proto,$2,$1,$3,0,0,$4,$5,36,$6,-,0,$3,1,1.000,1000,1000.0,$7,$7,10,20,30,40,clock_gettime,${8:-}"
}
vrow() { # mode variant x p50 p999 rate [p99]
	echo "$1,-,-,2,1,1,1,1,0,64,$2,$3,2,1,0.1,100,$6,0.1,0.1,$4,${7:-$4},$5,$5,clock_gettime,"
}
{
	echo "$hdr"
	for r in r1 r2 r3; do
		for pr in send-send send-write write-send write-write; do
			row M:1 "$pr" 4 1 16 365 0.030 $r
			row M:M "$pr" 4 1 16 365 0.030 $r
		done
		# READ best in M:1 in every round, by 0.05 to 0.09 ...
		row M:1 read 4 1 16 365 "$(case $r in r1) echo 0.090 ;; r2) echo 0.050 ;; r3) echo 0.070 ;; esac)" $r
		# ... in M:M worst in every round
		row M:M read 4 1 16 365 0.010 $r
		# 1:M: only two protocols measured: the verdict must still be computed
		row 1:M write-write 4 1 16 365 0.05 $r
		row 1:M read 4 1 16 365 0.01 $r
		# vertical: READ S=4 below S=1 in M:1 in rounds 1 and 3 only; M:M S=4 missing
		row M:1 read 4 4 16 365 "$([ $r = r2 ] && echo 0.060 || echo 0.050)" $r
	done
	# value size: every pair higher at 16384 in rounds 1 and 2, but round 2
	# lacks one pair (a failed run): it cannot judge "every"
	for pat in M:1 1:M M:M; do
		for pr in send-send send-write write-send write-write read; do
			for r in r1 r2; do
				row "$pat" "$pr" 4 1 4 365 0.010 $r
				[ "$r$pat$pr" = r2M:Mread ] || row "$pat" "$pr" 4 1 4 16384 0.080 $r
			done
		done
	done
	# horizontal: in the one round that has N=2 and N=6, every protocol lower at 6
	for pr in send-send send-write write-send write-write read; do
		row M:M "$pr" 2 1 16 365 0.040 r1
		row M:M "$pr" 6 1 16 365 0.020 r1
	done
} > "$t/proto.csv"
{
	echo "$hdr"
	# write-poll is fastest in round 2; round 1 hit a slow spell
	for x in 16 64; do
		vrow notify write-poll "$x" 8000 9000 100
		vrow notify write-imm "$x" 40 90 100
		vrow notify send-recv "$x" 45 90 100
	done
	for x in 16 64; do
		vrow notify write-poll "$x" 30 80 100
		vrow notify write-imm "$x" 40 90 100
		vrow notify send-recv "$x" 45 90 100
	done
	vrow recvpost one-by-one 1 40 500 100
	vrow recvpost aggregated 16 40 200 100
	# WRITE-like: the lower median and the higher p99 at every size, two rounds
	for r in 1 2; do
		for x in 16 64 256 512; do
			vrow writelike send-recv "$x" 50 900 100 300
			vrow writelike write-like "$x" 45 2000 100 700
		done
	done
} > "$t/verbs.csv"
echo "round 1: read M:1 N=2 S=1 R=1 V=365: exit 1" > "$t/failed.txt"
"$src/bench/protocols.sh" --report "$t" "$t/out" > "$t/log" 2>&1 || { cat "$t/log"; fail=1; }
md=$t/out/protocols.md
want() { # a line of the report that must be there (fixed string)
	grep -qF -- "$1" "$md" || { echo "missing in the report: $1"; fail=1; }
}
want "| M:1: READ gives the highest bandwidth (lesson 1, fig. 8) | best per round: read, read, read; send-send 0.0300, send-write 0.0300, write-send 0.0300, write-write 0.0300, read 0.0500..0.0900 | **reproduced** (all 3 rounds) |"
want "| M:M: READ gives the highest bandwidth (lesson 1, fig. 12a) | best per round: send-send, send-send, send-send;"
want "read 0.0100 | **not reproduced** (all 3 rounds) |"
want "| 1:M: a protocol responding by WRITE is best and READ is worst (lesson 1, fig. 10) | best/worst per round: write-write/read, write-write/read, write-write/read;"
want "| M:1: no vertical scaling; READ with more threads is below one thread (lesson 3, fig. 8b) | READ S=4 / S=1 per round: 0.56, 1.20, 0.71 | inconclusive (rounds disagree: 2 of 3 reproduce it) |"
want "| M:M: no vertical scaling; READ with more threads is below one thread (lesson 3, fig. 12b) | READ S=4 / S=1 per round: -, -, - | not measured"
want "per round: 5 of 5, -, -; N=6 / N=2: send-send 0.50, send-write 0.50, write-send 0.50, write-write 0.50, read 0.50 | **reproduced** (1 round) |"
want "pairs higher at V=16384 than at 365 (R=4), per round: 15 of 15, -, - | **reproduced** (1 round) |"
want "| WRITE + memory polling beats WRITE_WITH_IMM and SEND/RECV, which wait for a receive completion (seed 000 fig. 3.4) | sizes where write-poll is fastest: 0 of 2, 2 of 2 | inconclusive (rounds disagree: 1 of 2 reproduce it) |"
want "| aggregated receive posting lowers the outliers (seed 003 fig. 20) | p99.9 one by one/aggregated: 500/200 | **reproduced** (1 round) |"
want "lowers the median RTT (seed 003 fig. 27) | sizes where write-like is faster: 4 of 4, 4 of 4 | **reproduced** (all 2 rounds) |"
want "| UD: WRITE-like send/recv raises the outliers (seed 003 fig. 28) | sizes where write-like has the higher p99: 4 of 4, 4 of 4 | **reproduced** (all 2 rounds) |"
want "    round 1: read M:1 N=2 S=1 R=1 V=365: exit 1"
want "the highest bandwidth measured here, 0.090 Gbit/s"
# the plots: each point's median over the rounds
grep -q "^16 0.030$" "$t/out/m1-R-send-send.dat" ||
	{ echo "m1-R-send-send.dat:"; cat "$t/out/m1-R-send-send.dat"; fail=1; }
grep -q "^16 0.070$" "$t/out/m1-R-read.dat" || { echo "m1-R-read.dat not the median:"; cat "$t/out/m1-R-read.dat"; fail=1; }
grep -q "^16 30 " "$t/out/v-notify-write-poll.dat" || { echo "rounds not folded:"; cat "$t/out/v-notify-write-poll.dat"; fail=1; }
# three runs without round labels: each run is a round of its own, and the
# plot takes the median (0.05 of 0.09, 0.05, 0.02), not the last or the mean
mkdir -p "$t/r1" "$t/r2" "$t/r3"
for r in 1 2 3; do
	{
		echo "$hdr"
		for pr in send-send send-write write-send write-write; do row M:1 "$pr" 4 1 16 365 0.030; done
		row M:1 read 4 1 16 365 "$(case $r in 1) echo 0.090 ;; 2) echo 0.050 ;; 3) echo 0.020 ;; esac)"
	} > "$t/r$r/proto.csv"
done
"$src/bench/protocols.sh" --report "$t/r1" "$t/r2" "$t/r3" "$t/out3" > "$t/log3" 2>&1 || { cat "$t/log3"; fail=1; }
grep -qF "best per round: read, read, send-send; send-send 0.0300, send-write 0.0300, write-send 0.0300, write-write 0.0300, read 0.0200..0.0900 | inconclusive (rounds disagree: 2 of 3 reproduce it) |" \
	"$t/out3/protocols.md" || { echo "three runs not told apart:"; grep "M:1: READ" "$t/out3/protocols.md"; fail=1; }
grep -q "^16 0.050$" "$t/out3/m1-R-read.dat" || { echo "three runs not folded to the median:"; cat "$t/out3/m1-R-read.dat"; fail=1; }
grep -qF "Runs: 3" "$t/out3/protocols.md" || { echo "the report does not say it merged 3 runs"; fail=1; }
if [ $fail -ne 0 ]; then
	echo "--- report:"
	cat "$md"
	exit 1
fi
echo "proto_report: OK"
