#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install what zipline needs to build, test and benchmark on Debian 12.
# Idempotent: when every package is already installed it only checks (fast,
# no network, no root needed). Otherwise it runs apt-get as root, or through
# sudo when run by another user.
#
#   scripts/install-deps.sh            install the missing packages
#   scripts/install-deps.sh --check    only report what is missing (exit 1)
#
# The RDMA VM harness (tests/vm/) installs its own qemu and image tools.
set -euo pipefail

PKGS=(
	# build
	build-essential cmake pkg-config
	# libFuzzer targets and the fuzz corpus runs (clang's runtime libraries)
	clang libclang-rt-dev
	# rdma:// transport and its reference tools
	libibverbs-dev ibverbs-providers rdma-core perftest
	# man page check (docs/check-man.sh)
	groff-base
	# benchmarks: plots and the systems zl-bench compares against
	gnuplot-nox ucx-utils sockperf redis-server memcached
	# UCX as a method of `zl-bench blocks`, in the same run as zipline
	libucx-dev
	# the preload's real programs (tests/preload/progs): clients and servers
	python3 postgresql-15 nginx curl libmemcached-tools
	# ... HAProxy (splice between preloaded ends), socat and iperf3 (bulk streams)
	haproxy socat iperf3
	# rsockets' librspreload.so (bench/preload-compare.sh --vm)
	librdmacm1
)

check_only=0
if [ "${1:-}" = "--check" ]; then
	check_only=1
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
	echo "install-deps: dpkg-query not found; this script supports Debian 12 only" >&2
	exit 1
fi

missing=()
for p in "${PKGS[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	if [ "$status" != "installed" ]; then
		missing+=("$p")
	fi
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#PKGS[@]} packages already installed"
	exit 0
fi

echo "install-deps: missing: ${missing[*]}"
if [ "$check_only" = 1 ]; then
	exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
	as_root=()
elif command -v sudo >/dev/null 2>&1; then
	as_root=(sudo)
	echo "install-deps: not root, using sudo"
else
	echo "install-deps: run as root, or install sudo, or install by hand:" >&2
	echo "  apt-get install ${missing[*]}" >&2
	exit 1
fi

# Never prompt (CI has no stdin); keep the services' default configuration.
apt_env=(env DEBIAN_FRONTEND=noninteractive)
apt_opts=(-y -q -o Dpkg::Use-Pty=0 -o Dpkg::Options::=--force-confdef
	-o Dpkg::Options::=--force-confold --no-install-recommends)

echo "install-deps: apt-get update"
"${as_root[@]}" "${apt_env[@]}" apt-get update -q </dev/null >/dev/null
echo "install-deps: apt-get install ${missing[*]}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "${as_root[@]}" "${apt_env[@]}" apt-get install "${apt_opts[@]}" "${missing[@]}" \
	</dev/null >"$log" 2>&1; then
	tail -n 30 "$log" >&2
	echo "install-deps: apt-get install failed" >&2
	exit 1
fi
grep -E '^(Setting up|W:)' "$log" || true
echo "install-deps: done"
