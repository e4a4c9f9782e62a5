#!/bin/sh
# SPDX-License-Identifier: MIT
# fail_run.sh FAIL_TEST ZL_RUN LIB FAMILY [SANITIZER]: the failures suite,
# preloaded (every process it forks or execs inherits LD_PRELOAD, except the
# raw peers, which take the preload out of theirs), with the debug log in a
# file: the program counts the switches there after each case, and the
# total must be the number it expects (honest connections only).
t=$1 run=$2 lib=$3 fam=$4 san=$5
dir=$(mktemp -d) || exit 1
chmod 755 "$dir"
trap 'rm -rf "$dir"' EXIT
# sanitizer runtimes must come first; the preload comes after them
case "$san" in
*address*) export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" ;;
*thread*) run=; export LD_PRELOAD="$(${CC:-gcc} -print-file-name=libtsan.so) $lib" ;;
esac
start=$(date +%s)
if [ -n "$run" ]; then
	ZL_LOG=debug "$run" -- "$t" "$fam" >"$dir/out" 2>"$dir/log"
else
	ZL_LOG=debug "$t" "$fam" >"$dir/out" 2>"$dir/log"
fi
rc=$?
cat "$dir/out"
[ $rc -eq 77 ] && exit 77
switched=$(grep -c "switched to shared memory" "$dir/log")
want=$(sed -n 's/^switches: //p' "$dir/out")
echo "log: $switched connections switched to shared memory, $(($(date +%s) - start)) s"
if [ $rc -ne 0 ]; then
	echo "failed ($rc); the log without its debug lines:"
	grep -v "debug:" "$dir/log" | tail -n 60
	exit 1
fi
[ "$switched" = "$want" ] || { echo "the log has $switched switches, the run expects $want"; exit 1; }
echo "PASS: $fam: every switch in the log is an honest connection's"
