#!/bin/sh
# SPDX-License-Identifier: MIT
# attack_run.sh ATTACK_TEST ZL_RUN FAMILY ATTEMPTS MODE: the attack suite
# under the preload, its debug log in a file it reads (ATTACK_LOG).
t=$1 run=$2 fam=$3 n=$4 mode=$5
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"
: > "$dir/log"
chmod 666 "$dir/log"
ATTACK_LOG="$dir/log" ZL_LOG=debug "$run" -- "$t" "$fam" "$n" "$mode" 2>>"$dir/log"
rc=$?
[ $rc -eq 0 ] || [ $rc -eq 77 ] || { echo "log (warnings and errors):"; grep -v "debug:" "$dir/log" | tail -40; }
exit $rc
