#!/bin/sh
# SPDX-License-Identifier: MIT
# Prints ZL_VM_EXTRA words (tests/vm/rdma-vm.sh) for the real programs the
# VM cases and benchmarks run, those installed here: redis, and PostgreSQL
# 15 with its share dir and the time zones it loads (not its JIT: libLLVM
# alone is 110 MB; run it with jit=off).
for p in redis-server redis-cli redis-benchmark; do
	command -v "$p" 2>/dev/null
done
pg=/usr/lib/postgresql/15
if [ -x "$pg/bin/postgres" ]; then
	echo "$pg /usr/share/postgresql/15 /usr/share/zoneinfo"
	echo "!$pg/lib/bitcode !$pg/lib/llvmjit.so !$pg/lib/pgxs"
fi
