#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Verbs calls per message: perftest against rdma:// in each order mode,
# counted the same way by the LD_PRELOAD shim bench/verbs-count.c
# (BUILD_DIR/verbs-count.so), in the Soft-RoCE VM.
#
#   bench/verbs-count.sh [BUILD_DIR] [SIZE] [N1] [N2]
#
# Each program runs twice, with N1 and N2 iterations; the difference of the
# counts divided by N2 - N1 is the cost of one iteration, setup and teardown
# cancelled. Rows: ib_write_lat (a ping-pong: each side WRITEs a message
# and waits for the other's), ib_write_bw (the client streams WRITEs), and
# zl-bench pingpong over rdma:// with order=single, split and split2
# (spin_us=-1: both sides spin, as perftest's do, so no sleep or wake-up
# enters the counts). Printed per side: ibv_post_send calls (doorbells), send
# work requests, signaled and inline ones, bytes posted, ibv_poll_cq calls and
# those that found a completion, ibv_post_recv calls.
set -u
here=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-build}" && pwd)
SIZE=${2:-64}
N1=${3:-2000}
N2=${4:-6000}

if [ -z "${ZL_RDMA_IP_A:-}" ]; then # on the host: boot the VM and rerun inside
	[ -f "$B/verbs-count.so" ] || { echo "verbs-count.sh: no $B/verbs-count.so (build with libibverbs-dev)"; exit 77; }
	cp "$0" "$B/verbs-count.sh"
	ZL_VM_EXTRA="$B/tools/zl-bench $(command -v ib_write_lat) $(command -v ib_write_bw)" \
		exec "$here/../tests/vm/rdma-vm.sh" --timeout 1500 --share "$B" -- \
		"$B/verbs-count.sh" "$B" "$SIZE" "$N1" "$N2"
fi

shim=$B/verbs-count.so
zb=$B/tools/zl-bench
tmp=$(mktemp -d)
SRV=$ZL_RDMA_IP_B
port=$((7800 + RANDOM % 100))

# counts FILE: the shim's fields of its single line, space-separated
counts() { sed 's/.*post_send=//; s/[a-z_]*=//g' "$1"; }

# one NAME N SERVER-CMD... -- CLIENT-CMD... : run both sides with the shim
one() {
	local name=$1 n=$2 srv=() cli=()
	shift 2
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	port=$((port + 1))
	rm -f "$tmp/$name.$n.srv" "$tmp/$name.$n.cli"
	VERBS_COUNT_OUT=$tmp/$name.$n.srv LD_PRELOAD=$shim taskset -c 1 "${srv[@]//@P@/$port}" \
		> "$tmp/srv.log" 2>&1 &
	local pid=$!
	sleep 1
	if ! VERBS_COUNT_OUT=$tmp/$name.$n.cli LD_PRELOAD=$shim taskset -c 0 "${cli[@]//@P@/$port}" \
		> "$tmp/cli.log" 2>&1; then
		echo "verbs-count.sh: $name with $n iterations failed:" >&2
		cat "$tmp/cli.log" "$tmp/srv.log" >&2
		kill "$pid" 2>/dev/null
		return 1
	fi
	wait "$pid"
}

# row NAME SIDE: the per-iteration difference of the two runs
row() {
	local a b
	a=$(counts "$tmp/$1.$N1.$2") b=$(counts "$tmp/$1.$N2.$2")
	awk -v a="$a" -v b="$b" -v d=$((N2 - N1)) -v name="$1" -v side="$2" 'BEGIN {
		split(a, x, " "); split(b, y, " ")
		printf "%-22s %-6s", name, side
		for (i = 1; i <= 9; i++) printf " %9.4f", (y[i] - x[i]) / d
		printf "\n"
	}'
}

pt() { # perftest TOOL N
	one "$1" "$2" "$1" -d "$ZL_RDMA_DEV_B" -x 1 -F -s "$SIZE" -n "$2" -p @P@ -- \
		"$1" -d "$ZL_RDMA_DEV_A" -x 1 -F -s "$SIZE" -n "$2" -p @P@ "$SRV"
}

zl() { # ORDER N
	local q="order=$1&spin_us=-1"
	one "zl-$1" "$2" "$zb" pingpong --server --timeout 60 \
		--url "rdma://$SRV:@P@?dev=$ZL_RDMA_DEV_B&$q" -- \
		"$zb" pingpong --client --timeout 60 --size "$SIZE" --iters "$2" --warmup 100 \
		--url "rdma://$SRV:@P@?dev=$ZL_RDMA_DEV_A&$q"
}

status=0
for n in "$N1" "$N2"; do
	pt ib_write_lat "$n" || status=1
	pt ib_write_bw "$n" || status=1
	for o in single split split2; do zl "$o" "$n" || status=1; done
done
echo "verbs calls per iteration ($SIZE B; difference of $N1 and $N2 iterations):"
printf "%-22s %-6s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n" method side post_send wr signaled \
	inline bytes poll_cq poll_hits post_recv recv_wr
for m in ib_write_lat ib_write_bw zl-single zl-split zl-split2; do
	for side in cli srv; do
		[ -s "$tmp/$m.$N1.$side" ] && [ -s "$tmp/$m.$N2.$side" ] && row "$m" "$side"
	done
done
rm -rf "$tmp"
exit $status
