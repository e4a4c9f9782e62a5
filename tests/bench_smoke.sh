#!/bin/bash
# SPDX-License-Identifier: MIT
# bench_smoke BUILD_DIR [ab]: the benchmark tools run end to end, briefly.
# Numbers are not checked (a test cannot judge speed on a shared machine);
# exit codes and the tools' own echo checks are. Exit 77: fewer than 2 CPUs.
set -u
B=$1
[ "$(nproc)" -ge 2 ] || { echo "SKIP: the benchmarks need two CPUs"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
run() { # command... : must exit 0 within 60 s and print "$WANT"
	out=$(timeout 60 "$@" 2>&1) || { echo "$out"; fail "$* exited $?"; }
	grep -q "$WANT" <<< "$out" || { echo "$out"; fail "$*: no '$WANT' in the output"; }
	echo "ok: $*"
}
if [ "${2:-}" = ab ]; then
	WANT="B/A per block" run "$B/tools/zl-ab" "$B/libzipline.so" "$B/libzipline.so" --size 64 \
		--blocks 20 --block-iters 50
	WANT="B/A per block" run "$B/tools/zl-ab" "$B/libzipline.so" "$B/libzipline.so" \
		--size 4096 --blocks 20 --block-iters 50 --zerocopy
	exit 0
fi
WANT="against the floor" run "$B/tools/zl-bench" blocks --size 64,4096 --iters 2000 --blocks 20
for mode in --zerocopy --unread; do
	WANT="round-trips/s" run "$B/tools/zl-bench" pingpong $mode --url "shm://smoke-$$" \
		--size 8,64,4096,300000 --iters 2000 --warmup 100 --timeout 20
done
# the echo server in every event loop, each printing its per-round-trip counts
for loop in poll arm poller; do
	for url in "shm://smoke-$$" "unix:///tmp/zl-smoke-$$.sock"; do
		WANT="per round trip" run "$B/tools/zl-bench" pingpong --loop $loop --url "$url" \
			--size 8,64,4096,300000 --iters 500 --warmup 50 --timeout 20
	done
done
# one-way streaming: every message checked by the receiver; with a window;
# and the checks themselves: an injected drop, duplicate or torn message
# must fail the run with the receiver's ERROR line
for url in "shm://smoke-$$" "unix:///tmp/zl-smoke-$$.sock" "tcp://127.0.0.1:0"; do
	WANT="GB/s median" run "$B/tools/zl-bench" stream --url "$url" --size 8,64,4k,300k \
		--iters 5000 --bytes 8m --runs 2 --timeout 20
	WANT="GB/s median" run "$B/tools/zl-bench" stream --url "$url" --size 64,64k --iters 3000 \
		--bytes 8m --runs 1 --window 16 --timeout 20
	for f in drop:100 dup:1500 dup:2000 torn:1500; do
		out=$(ZL_BENCH_STREAM_FAULT=$f timeout 60 "$B/tools/zl-bench" stream --url "$url" \
			--size 64,4k --iters 1000 --runs 1 --timeout 20 2>&1)
		rc=$?
		[ $rc -eq 1 ] && grep -q "receiver: ERROR" <<< "$out" ||
			{ echo "$out"; fail "stream $url with fault $f: exit $rc, no receiver ERROR"; }
		echo "ok: stream $url fails on fault $f"
	done
done
# zero copy on shm: written into the ring, checked in place (1 MiB: copied)
WANT="GB/s median" run "$B/tools/zl-bench" stream --zerocopy --url "shm://smoke-$$" \
	--size 8,64,4k,300k,1m --iters 3000 --bytes 8m --runs 1 --timeout 20
for f in drop:100 dup:1500 torn:1500; do
	out=$(ZL_BENCH_STREAM_FAULT=$f timeout 60 "$B/tools/zl-bench" stream --zerocopy \
		--url "shm://smoke-$$" --size 64,4k --iters 1000 --runs 1 --timeout 20 2>&1)
	rc=$?
	[ $rc -eq 1 ] && grep -q "receiver: ERROR" <<< "$out" ||
		{ echo "$out"; fail "zero-copy stream with fault $f: exit $rc, no receiver ERROR"; }
	echo "ok: zero-copy stream fails on fault $f"
done
WANT="GB/s median" run "$B/tools/zl-bench" spsc --stream --size 8,4k,1m --iters 5000 --bytes 8m \
	--runs 2
WANT="ratios of median" run "$B/tools/zl-bench" stream-compare --size 64,64k --iters 3000 \
	--bytes 4m --runs 1 --batch 8 --timeout 20 --csv "/tmp/zl-smoke-$$.csv" \
	--png "/tmp/zl-smoke-$$.png"
rm -f "/tmp/zl-smoke-$$.csv" "/tmp/zl-smoke-$$.png"
WANT="round-trips/s" run "$B/tools/zl-bench" rawtcp --loop epoll --size 8,64,100000 --iters 500 \
	--warmup 50
echo "bench_smoke: all passed"
