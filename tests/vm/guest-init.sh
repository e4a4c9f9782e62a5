#!/bin/bash
# /init of the rdma-vm.sh guest (PID 1). Brings up Soft-RoCE (rxe0 on veth0,
# rxe1 on veth1, ... ZL_VM_RXE of them), runs the host's command with its
# output on ttyS1, reports the exit code through the 9p control share, and
# powers off.
# Our stdout/stderr are the kernel console (ttyS0, a log file on the host).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
umask 022

ctl=/run/zl-vm

say() {
	local up='?'
	read -r up _ </proc/uptime 2>/dev/null
	echo "[$up] zl-vm-init: $*"
}
mounted() { grep -q " $1 " /proc/mounts; } # busybox here has no mountpoint

# PID 1 must never just exit (kernel panic): always power off.
finish() {
	sync
	umount -a -r >/dev/null 2>&1
	poweroff -f
	sleep 5 # poweroff -f does not return; just in case
}
trap finish EXIT

fail() {
	say "FAILED: $*"
	mounted "$ctl" && echo "$*" >"$ctl/setup-failed"
	exit 1
}

mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs shm /dev/shm
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mkdir -p "$ctl"
say "loading modules"

# Order matters (crc32 before rdma_rxe); the list comes from rdma-vm.sh.
while read -r m; do
	modprobe "$m" || fail "modprobe $m"
	# The control share can be mounted as soon as 9p is there.
	if [ "$m" = 9p ] && ! mounted "$ctl"; then
		mount -t 9p -o trans=virtio,version=9p2000.L zlctl "$ctl" || fail "mount control share"
	fi
done </etc/zl-vm-modules
mounted "$ctl" || fail "control share not mounted"

# ZL_VM_CWD, ZL_VM_SHARE, ZL_VM_MTU, ZL_VM_RXE, ZL_VM_CMD=(...), ZL_VM_USER_ENV=(...)
# shellcheck source=/dev/null
. "$ctl/cmd" || fail "cannot read $ctl/cmd"

# --- network: ZL_VM_RXE addresses of one host, forced across veths --------
# Two (the default): rxe0 on veth0, rxe1 on veth1, one veth pair. More: each
# vethI's peer is a port of the bridge br0, so every pair of them is one
# bridge hop apart (rxe in 6.1 serves only this netns: no netns per node).
n=${ZL_VM_RXE:-2}
ip link set lo up
if [ "$n" = 2 ]; then
	ip link add veth0 type veth peer name veth1 || fail "ip link add veth"
else
	{ ip link add br0 type bridge forward_delay 0 && ip link set br0 up; } || fail "bridge br0"
	for ((i = 0; i < n; i++)); do
		{
			ip link add "veth$i" type veth peer name "brp$i" &&
				ip link set "brp$i" mtu "${ZL_VM_MTU:-1500}" master br0 up
		} || fail "veth$i on br0"
	done
	# a packet now passes the per-CPU backlog twice (veth to bridge port,
	# port to veth): the default 1000 overflowed in M:M runs with 4 nodes
	# (softnet_stat drops), and rxe under that loss returned READs whose
	# bytes were not the responder's (zl-proto: "bad framing")
	echo 20000 >/proc/sys/net/core/netdev_max_backlog
fi
devs=() ips=()
for ((i = 0; i < n; i++)); do
	devs+=("rxe$i") ips+=("10.0.0.$((i + 1))")
	ip link set "veth$i" mtu "${ZL_VM_MTU:-1500}" || fail "veth MTU ${ZL_VM_MTU:-}"
	ip addr add "${ips[i]}/24" dev "veth$i" || fail "ip addr add"
done
for c in all default $(for ((i = 0; i < n; i++)); do echo "veth$i"; done); do
	echo 1 >"/proc/sys/net/ipv4/conf/$c/accept_local" # source is one of ours
	echo 0 >"/proc/sys/net/ipv4/conf/$c/rp_filter"
	echo 1 >"/proc/sys/net/ipv4/conf/$c/arp_ignore" # each veth answers for its own address
done
for ((i = 0; i < n; i++)); do ip link set "veth$i" up || fail "veth$i up"; done
# Local-to-local traffic would go through lo, where rxe drops it. Locally
# generated packets (iif lo) from address i to another of ours leave by
# vethI (table 10+i); the `local` table moves below those rules so received
# packets are still delivered, and so is traffic to one's own address (no
# route in table 10+i: the lookup falls through).
{ ip rule add pref 100 lookup local && ip rule del pref 0 lookup local; } ||
	fail "ip rule local"
for ((i = 0; i < n; i++)); do
	for ((j = 0; j < n; j++)); do
		[ "$i" = "$j" ] ||
			ip route add "${ips[j]}/32" dev "veth$i" src "${ips[i]}" table $((10 + i)) ||
			fail "veth routes"
	done
	ip rule add pref $((10 + i)) from "${ips[i]}" iif lo lookup $((10 + i)) || fail "veth rules"
	rdma link add "rxe$i" type rxe netdev "veth$i" || fail "rdma link add rxe$i"
done

# Ports go ACTIVE with the carrier; the IPv4 GIDs (index 1) arrive from a
# workqueue a little later. Wait for all.
port_ready() { # i: rxeI with ::ffff:10.0.0.(i+1)
	local p=/sys/class/infiniband/rxe$1/ports/1
	grep -q ACTIVE "$p/state" 2>/dev/null &&
		grep -q "ffff:0a00:$(printf %04x $(($1 + 1)))\$" "$p/gids/1" 2>/dev/null
}
all_ready() {
	for ((i = 0; i < n; i++)); do port_ready "$i" || return 1; done
}
for _ in $(seq 200); do
	all_ready && break
	sleep 0.1
done
all_ready || fail "rxe ports/GIDs not ready: $(cat /sys/class/infiniband/rxe*/ports/1/{state,gids/1} 2>&1)"
say "${devs[*]} ready"
dev_list=$(IFS=,; echo "${devs[*]}") ip_list=$(IFS=,; echo "${ips[*]}")

# --- the share and the command ------------------------------------------------
mkdir -p "$ZL_VM_SHARE"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 zlshare "$ZL_VM_SHARE" ||
	fail "mount share $ZL_VM_SHARE"
{ mkdir -p "$ZL_VM_CWD" && cd "$ZL_VM_CWD"; } || fail "cd $ZL_VM_CWD"

ulimit -l unlimited # verbs memory registration pins pages
stty -F /dev/ttyS1 raw -echo # no \n -> \r\n translation on the output port

say "running: ${ZL_VM_CMD[*]}"
# bash, not busybox env, execs CMD: that busybox prefers its own applets to
# the real binaries in PATH.
(
	export ZL_VM=1 ZL_RDMA_DEV_A=rxe0 ZL_RDMA_DEV_B=rxe1 \
		ZL_RDMA_IP_A=10.0.0.1 ZL_RDMA_IP_B=10.0.0.2 ZL_RDMA_GID_INDEX=1 \
		ZL_RDMA_DEVS="$dev_list" ZL_RDMA_IPS="$ip_list"
	for kv in "${ZL_VM_USER_ENV[@]}"; do export "${kv?}"; done
	exec "${ZL_VM_CMD[@]}"
) </dev/null >/dev/ttyS1 2>&1
rc=$?
say "command exited $rc"
echo "$rc" >"$ctl/rc"
