#!/bin/bash
# The rdma:// test suite, run INSIDE the Soft-RoCE VM (tests/vm/rdma-vm.sh):
# the transport-independent channel tests over rdma:// in both order modes,
# then the verbs-specific cases. Usage: rdma-suite.sh BUILD_DIR
set -u
B=${1:?usage: rdma-suite.sh BUILD_DIR}
: "${ZL_RDMA_IP_A:?run this inside tests/vm/rdma-vm.sh}"
export ZL_TEST_SCALE=${ZL_TEST_SCALE:-0.05}   # the emulator is 10-100x slower
pass=0 fail=0 failed=()

run() { # name, command...
	local name=$1 t0 rc
	shift
	t0=$(date +%s)
	timeout 300 "$@" > "/tmp/$name.log" 2>&1
	rc=$?
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1))
		echo "PASS $name ($(( $(date +%s) - t0 )) s)"
	elif [ $rc -eq 77 ]; then
		echo "SKIP $name: $(tail -1 "/tmp/$name.log")"
	else
		fail=$((fail + 1))
		failed+=("$name")
		echo "FAIL $name (exit $rc):"
		tail -15 "/tmp/$name.log" | sed 's/^/    /'
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
done
# The N:1 server over rdma:// (the mailbox written through memory windows),
# fewer clients than on the host, and rogue clients against the windows.
export ZL_TEST_URL_rdma="rdma://$ZL_RDMA_IP_A:0?dev=$ZL_RDMA_DEV_A"
export ZL_TEST_CONNECT_rdma="dev=$ZL_RDMA_DEV_B"
run srv_basic_rdma "$B/tests/srv_basic" rdma 8
run srv_kill_rdma "$B/tests/srv_fault" rdma kill
run srv_rogue_rdma "$B/tests/srv_rogue_rdma"
for c in kill memlock hostile rkey auto ring stall; do
	run "verbs_$c" "$B/src/transport/verbs/verbs_test" "$c" split
done
# The one-sided store (src/onesided) over rdma: the server on rxe0, its
# clients on rxe1, through READ, WRITE and CMP_AND_SWP on the chunk.
export ZL_OS_TEST_SCHEME=rdma
for t in os_basic os_lin os_crash os_gc os_hostile; do
	[ -x "$B/tests/$t" ] && run "${t}_rdma" "$B/tests/$t"
done
unset ZL_OS_TEST_SCHEME
# The preload across hosts (issue 19): the semantics suite across the two
# addresses, both ends preloaded and switched; mixed peers and
# configurations staying on TCP; kill -9 of either end mid-transfer;
# redis-server with redis-cli and redis-benchmark (skipped without them).
for c in sem echo mixed_plain_server mixed_plain_client mixed_unnamed bad_config no_device \
	kill_server kill_client redis; do
	run "xhost_$c" bash "$(dirname "$0")/xhost-suite.sh" "$B" "$c"
done
[ ${#failed[@]} -eq 0 ] || echo "failed: ${failed[*]}"
echo "rdma suite: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
