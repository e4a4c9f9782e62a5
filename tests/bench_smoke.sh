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
WANT="round-trips/s" run "$B/tools/zl-bench" rawtcp --loop epoll --size 8,64,100000 --iters 500 \
	--warmup 50
echo "bench_smoke: all passed"
