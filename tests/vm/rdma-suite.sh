#!/bin/bash
# The rdma:// test suite, run INSIDE the Soft-RoCE VM (tests/vm/rdma-vm.sh):
# the transport-independent channel tests over rdma:// in both order modes,
# then the verbs-specific cases. Usage: rdma-suite.sh BUILD_DIR
set -u
B=${1:?usage: rdma-suite.sh BUILD_DIR}
: "${ZL_RDMA_IP_A:?run this inside tests/vm/rdma-vm.sh}"
export ZL_TEST_SCALE=${ZL_TEST_SCALE:-0.05}   # the emulator is 10-100x slower
pass=0 fail=0 failed=()

run() { # name, command... (ZL_SUITE_FILTER: a regex the names to run match)
	local name=$1 t0 rc
	shift
	[[ $name =~ ${ZL_SUITE_FILTER:-.} ]] || return 0
	t0=$(date +%s)
	timeout 300 "$@" > "/tmp/$name.log" 2>&1
	rc=$?
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1))
		echo "PASS $name ($(( $(date +%s) - t0 )) s): $(tail -1 "/tmp/$name.log" | cut -c1-160)"
	elif [ $rc -eq 77 ]; then
		echo "SKIP $name: $(tail -1 "/tmp/$name.log")"
	else
		fail=$((fail + 1))
		failed+=("$name")
		echo "FAIL $name (exit $rc); its log without the passing cases:"
		grep -v '^ok ' "/tmp/$name.log" | tail -40 | sed 's/^/    /'
	fi
}

# zl-bench stream over rdma:// (receiver on device B, sender on A): every
# message checked; any loss, duplicate, reordering or tear fails it.
stream_rdma() { # order
	local p=$((7400 + RANDOM % 500)) srv rc log=/tmp/stream_srv_$1.log
	local q="--size 8,64,4k,300k --iters 2000 --bytes 2m --runs 2 --timeout 120"
	# shellcheck disable=SC2086 # $q is a list of options
	"$B/tools/zl-bench" stream --server --pin 1 $q \
		--url "rdma://$ZL_RDMA_IP_B:$p?dev=$ZL_RDMA_DEV_B&order=$1" > "$log" 2>&1 &
	srv=$!
	for _ in $(seq 100); do grep -qs "receiving on" "$log" && break; sleep 0.2; done
	# shellcheck disable=SC2086
	"$B/tools/zl-bench" stream --client --pin 0 $q \
		--url "rdma://$ZL_RDMA_IP_B:$p?dev=$ZL_RDMA_DEV_A&order=$1"
	rc=$?
	[ $rc -eq 0 ] || kill "$srv" 2>/dev/null
	wait "$srv" || { cat "$log"; rc=1; }
	return $rc
}
export -f stream_rdma # run's timeout runs it in a child shell
export B

for order in split single split2; do
	export ZL_TEST_URL_rdma="rdma://$ZL_RDMA_IP_A:0?dev=$ZL_RDMA_DEV_A&order=$order"
	export ZL_TEST_CONNECT_rdma="dev=$ZL_RDMA_DEV_B&order=$order"
	for t in chan_basic chan_timeout chan_peer_kill chan_zerocopy chan_fd chan_stream \
		chan_sendv chan_stop_rx chan_kill_tx; do
		run "${t}_rdma_$order" "$B/tests/$t" rdma
	done
	run "chan_stream_duplex_rdma_$order" "$B/tests/chan_stream" rdma duplex
	run "verbs_sizes_$order" "$B/src/transport/verbs/verbs_test" sizes "$order"
	run "stream_rdma_$order" bash -c 'stream_rdma "$0"' "$order"
	run "verbs_counts_$order" "$B/src/transport/verbs/verbs_test" counts "$order"
	run "verbs_sleepcounts_$order" "$B/src/transport/verbs/verbs_test" sleepcounts "$order"
	run "verbs_batchcounts_$order" "$B/src/transport/verbs/verbs_test" batchcounts "$order"
done
# The N:1 server over rdma:// (the mailbox written through memory windows),
# fewer clients than on the host, and rogue clients against the windows.
export ZL_TEST_URL_rdma="rdma://$ZL_RDMA_IP_A:0?dev=$ZL_RDMA_DEV_A"
export ZL_TEST_CONNECT_rdma="dev=$ZL_RDMA_DEV_B"
run srv_basic_rdma "$B/tests/srv_basic" rdma 8
run api_shutdown_rdma "$B/tests/api_shutdown" rdma
# Not rdma, but only here may a test raise RLIMIT_NOFILE to 100,000 (the
# host's container caps it at 20,000): one zl_poller with 100,000 fds and
# 1,000 channels, its memory and its exact reports.
run poller_scale_100k "$B/tests/poller_scale" 100000 1000
run srv_kill_rdma "$B/tests/srv_fault" rdma kill
run srv_rogue_rdma "$B/tests/srv_rogue_rdma"
for c in kill memlock hostile rkey auto ring stall; do
	run "verbs_$c" "$B/src/transport/verbs/verbs_test" "$c" split
done
# The sender's close on a slow, lossy link (device B's packets 10 ms late,
# 3% lost: a full ring's recovery takes many round trips after the sender
# closed and exited): its stream's tail must arrive.
closetail_rdma() {
	local rc
	tc qdisc add dev veth1 root netem delay 10ms loss 3% || { echo "SKIP: no tc netem"; return 77; }
	local out
	out=$("$B/src/transport/verbs/verbs_test" closetail split 2>&1)
	rc=$?
	tc qdisc del dev veth1 root
	printf '%s\n' "$out" | grep -v '^closetail:'
	printf '%s\n' "$out" | grep '^closetail:' # (last: the suite shows it)
	return $rc
}
export -f closetail_rdma
run closetail_rdma bash -c closetail_rdma
# The one-sided store (src/onesided) over rdma: the server on rxe0, its
# clients on rxe1, through READ, WRITE and CMP_AND_SWP on the chunk.
export ZL_OS_TEST_SCHEME=rdma
for t in os_basic os_lin os_crash os_gc os_hostile os_batch os_slot; do
	[ -x "$B/tests/$t" ] && run "${t}_rdma" "$B/tests/$t"
done
unset ZL_OS_TEST_SCHEME
# zl-proto (tools/zl-proto): each of the protocols of "An Evaluation of RDMA-based Message Passing Protocols" in each pattern,
# four nodes (processes) over the devices (node i on device i modulo their
# number: ZL_VM_RXE=4 gives each its own), every response checked
# against its request; then a node killed mid-run and a node 0 that never
# answers must end the run with a message and a non-zero exit, not a hang.
proto_must_fail() { # log-pattern, command...
	local want=$1 t0=$(date +%s) rc
	shift
	"$@" > /tmp/proto_must_fail.log 2>&1
	rc=$?
	cat /tmp/proto_must_fail.log
	echo "exit $rc after $(( $(date +%s) - t0 )) s"
	[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "$want" /tmp/proto_must_fail.log
}
export -f proto_must_fail
# Four nodes started one by one (as on four hosts), node 2 killed mid-run:
# the others must notice by themselves (a QP error or the rendezvous
# closing), say so and exit non-zero, in seconds.
proto_kill() {
	local port=$((7900 + RANDOM % 500)) pids=() i r rc=0 dev t0
	for i in 0 1 2 3; do
		dev=$ZL_RDMA_DEV_A
		[ $((i % 2)) -eq 1 ] && dev=$ZL_RDMA_DEV_B
		"$B/tools/zl-proto" --proto write-write --pattern mm -N 4 -S 1 -R 4 --node $i \
			--coord 127.0.0.1:$port --dev "$dev" --time 120 --warmup 0.2 --timeout 10 \
			> "/tmp/proto_kill_$i.log" 2>&1 &
		pids+=($!)
	done
	for _ in $(seq 150); do grep -qs running /tmp/proto_kill_0.log && break; sleep 0.2; done
	grep -q running /tmp/proto_kill_0.log || { echo "the run did not start"; rc=1; }
	sleep 1
	kill -9 "${pids[2]}"
	t0=$(date +%s)
	for i in 0 1 3; do
		wait "${pids[$i]}"
		r=$?
		echo "node $i: exit $r after $(( $(date +%s) - t0 )) s: $(tail -1 "/tmp/proto_kill_$i.log")"
		[ $r -ne 0 ] || rc=1
	done
	grep -q "node 2" /tmp/proto_kill_[013].log || { echo "nobody named node 2"; rc=1; }
	[ $(( $(date +%s) - t0 )) -lt 60 ] || { echo "too slow to notice"; rc=1; }
	return $rc
}
export -f proto_kill
if [ -x "$B/tools/zl-proto" ]; then
	pt=$(awk -v s="$ZL_TEST_SCALE" 'BEGIN { t = 20 * s; print t < 0.5 ? 0.5 : t }')
	pq="--local --dev $ZL_RDMA_DEVS --time $pt --warmup 0.2 --timeout 20 -N 4 -S 1 -R 4"
	for pat in m1 1m mm; do
		for pr in send-send send-write write-send write-write read; do
			# shellcheck disable=SC2086 # $pq is a list of options
			run "proto_${pr}_$pat" "$B/tools/zl-proto" --proto "$pr" --pattern "$pat" $pq
		done
	done
	# the verbs experiments (two nodes), briefly: every message checked;
	# 60 round trips (and 10 to warm up) use writelike's 64 receives up
	for m in qptype notify indirect chain signal inline recvpost writelike; do
		run "proto_mode_$m" "$B/tools/zl-proto" --mode "$m" --iters 60 --local \
			--dev "$ZL_RDMA_DEV_A,$ZL_RDMA_DEV_B" --timeout 20
	done
	run proto_kill bash -c proto_kill
	# the checks themselves: one response spoiled must fail the run
	pi="--pattern m1 -N 3 -S 1 -R 4 --local --dev $ZL_RDMA_DEV_A,$ZL_RDMA_DEV_B --time 1 --warmup 0.2 --timeout 3"
	# shellcheck disable=SC2086
	run proto_inject_corrupt bash -c 'proto_must_fail "payload does not match" "$@"' _ \
		"$B/tools/zl-proto" --proto write-write $pi --inject corrupt
	# shellcheck disable=SC2086
	run proto_inject_drop bash -c 'proto_must_fail "got no response within 3 s after the run (lost)" "$@"' _ \
		"$B/tools/zl-proto" --proto send-write $pi --inject drop
	# shellcheck disable=SC2086
	run proto_inject_dup bash -c 'proto_must_fail "duplicate\|id does not match" "$@"' _ \
		"$B/tools/zl-proto" --proto send-send $pi --inject dup
	run proto_no_answer bash -c 'proto_must_fail "cannot reach node 0" "$@"' _ \
		"$B/tools/zl-proto" --proto read --pattern m1 -N 2 --node 1 --coord 127.0.0.1:9 \
		--dev "$ZL_RDMA_DEV_B" --timeout 2
	run proto_never_joins bash -c 'proto_must_fail "only 1 of 2 nodes joined" "$@"' _ \
		"$B/tools/zl-proto" --proto read --pattern m1 -N 2 --node 0 --coord 127.0.0.1:0 \
		--dev "$ZL_RDMA_DEV_A" --timeout 2
fi
# The preload across hosts: the semantics suite across the two
# addresses, both ends preloaded and switched; mixed peers and
# configurations staying on TCP; kill -9 of either end mid-transfer;
# redis-server with redis-cli and redis-benchmark, and PostgreSQL 15 with
# pgbench (each skipped without them).
for c in sem echo epecho mixed_plain_server mixed_plain_client mixed_unnamed bad_config no_device \
	kill_server kill_client redis postgres; do
	run "xhost_$c" bash "$(dirname "$0")/xhost-suite.sh" "$B" "$c"
done
[ ${#failed[@]} -eq 0 ] || echo "failed: ${failed[*]}"
echo "rdma suite: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
