#!/bin/sh
# SPDX-License-Identifier: MIT
# sem_run.sh SEM_TEST ZL_RUN LIB FAMILY [SANITIZER]: the semantics suite twice,
# plain and with the preload on both ends (every process it forks or execs
# inherits LD_PRELOAD). Both runs must pass with the same transcript, and
# the preloaded run must really have switched its connections.
sem=$1 run=$2 lib=$3 fam=$4 san=$5
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
"$sem" "$fam" >"$dir/plain" 2>"$dir/plain.err"
rc=$?
[ $rc -eq 77 ] && { cat "$dir/plain"; exit 77; }
[ $rc -eq 0 ] || { echo "plain run failed ($rc):"; cat "$dir/plain" "$dir/plain.err"; exit 1; }
# sanitizer runtimes must come first; the preload comes after them
case "$san" in
*address*) export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" ;;
*thread*) run=; export LD_PRELOAD="$(${CC:-gcc} -print-file-name=libtsan.so) $lib" ;;
esac
if [ -n "$run" ]; then
	ZL_LOG=debug "$run" -- "$sem" "$fam" >"$dir/pre" 2>"$dir/pre.err"
else
	ZL_LOG=debug "$sem" "$fam" >"$dir/pre" 2>"$dir/pre.err"
fi
rc=$?
switched=$(grep -c "switched to shared memory" "$dir/pre.err")
cat "$dir/pre"
echo "preloaded: $switched connections switched to shared memory"
[ $rc -eq 0 ] || { echo "preloaded run failed ($rc):"; grep -v "debug:" "$dir/pre.err"; exit 1; }
diff "$dir/plain" "$dir/pre" || { echo "transcripts differ (plain <, preloaded >)"; exit 1; }
# every case makes at least one connection; all but a few must switch
# (SEM_MIN_SWITCHED: a suite's own count)
[ "$switched" -ge "${SEM_MIN_SWITCHED:-40}" ] || { echo "only $switched connections switched"; exit 1; }
echo "PASS: $fam: the same $(grep -c '^ok' "$dir/pre") cases pass plain and preloaded"
