# SPDX-License-Identifier: MIT
# Shared by the real-program tests: sourced with ZL_RUN set (the build's
# zl-run). Every server runs from a temporary directory on a free port and
# is stopped on exit, also on failure.
set -u
tmp=$(mktemp -d /tmp/zlprog.XXXXXX) || exit 1
pids=""
cleanup() { # servers run in their own process groups (setsid): all of it goes
	for p in $pids; do kill -TERM "-$p" 2>/dev/null; done
	sleep 0.3
	for p in $pids; do kill -KILL "-$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
need() { for c in "$@"; do command -v "$c" >/dev/null 2>&1 || skip "$c is not installed (scripts/install-deps.sh)"; done; }

# A TCP port nobody listens on now (without python, as in the RDMA VM's
# guest where nothing else runs: a random one).
free_port() {
	if command -v python3 >/dev/null; then
		python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
	else
		echo $((20000 + $(od -An -N2 -tu2 /dev/urandom) % 20000))
	fi
}

# Wait until CMD succeeds, at most $1 tenths of a second.
wait_for() { # (sh has no locals: its counter is named apart)
	_wait_n=$1; shift
	while [ "$_wait_n" -gt 0 ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
		_wait_n=$((_wait_n - 1))
	done
	return 1
}

# Run with the preload (pre) or without (plain); debug log to $tmp/zl.log.
pre() { ZL_LOG=debug "$ZL_RUN" -- "$@" 2>>"$tmp/zl.log"; }
plain() { "$@"; }

# How many connections switched to shared memory so far (the preload logs
# to standard error, which some servers send to their own logs).
switched() {
	find "$tmp" -name "*.log" -exec cat {} + 2>/dev/null | grep -c "switched to shared memory"
}

# Start a server in the background, preloaded (pre_bg) or not (plain_bg).
pre_bg() { ZL_LOG=debug setsid "$ZL_RUN" -- "$@" >>"$tmp/server.out" 2>>"$tmp/zl.log" & pids="$pids $!"; }
plain_bg() { setsid "$@" >>"$tmp/server.out" 2>&1 & pids="$pids $!"; }

# as_user CMD...: run as the unprivileged user that servers refusing root
# need ($user, nobody when we are root; util-linux's setpriv, not runuser:
# the RDMA VM's guest has no PAM, and its busybox sh would run its own
# setpriv, which cannot change users); as_bg: the same as a server, in the
# background and its own process group (stopped on exit).
if [ "$(id -u)" = 0 ]; then
	user=nobody
	as() { /usr/bin/setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups -- "$@"; }
	as_bg() { setsid /usr/bin/setpriv --reuid="$user" --regid="$(id -g "$user")" --clear-groups -- "$@" & pids="$pids $!"; }
else
	user=$(id -un)
	as() { "$@"; }
	as_bg() { setsid "$@" & pids="$pids $!"; }
fi

# cpu_pct PID SECS: the % of one CPU that PID used over the next SECS seconds.
cpu_pct() {
	_t0=$(awk '{print $14 + $15}' "/proc/$1/stat")
	sleep "$2"
	_t1=$(awk '{print $14 + $15}' "/proc/$1/stat")
	awk -v a="$_t0" -v b="$_t1" -v hz="$(getconf CLK_TCK)" -v s="$2" \
		'BEGIN { printf "%.2f", (b - a) / hz / s * 100 }'
}
