#!/bin/sh
# SPDX-License-Identifier: MIT
# syscalls_run.sh SYSCALLS_TEST ZL_RUN FAMILY STYLE: the ping-pong counted
# plain (the kernel's path: at least one system call per round trip on
# each side, which shows the count works) and preloaded (at most 0.05).
t=$1 run=$2 fam=$3 style=$4
"$t" "$fam" "$style" 1 1000 50000
rc=$?
[ $rc -eq 0 ] || exit $rc
exec "$run" -- "$t" "$fam" "$style" 0 0.05
