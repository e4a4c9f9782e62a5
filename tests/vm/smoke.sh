#!/bin/bash
# Smoke test, run INSIDE the rdma-vm.sh guest: the rxe devices exist, and a
# perftest RDMA WRITE latency run completes between rxe0 and rxe1 and, with
# ZL_VM_RXE > 2, around the ring of all devices (rxe1 -> rxe2, ...), its
# packets counted on both rxe devices and on the client's veth only.
#   tests/vm/rdma-vm.sh -- tests/vm/smoke.sh
#   ZL_VM_RXE=6 tests/vm/rdma-vm.sh -- tests/vm/smoke.sh
set -euo pipefail

IFS=, read -r -a devs <<<"${ZL_RDMA_DEVS:-${ZL_RDMA_DEV_A:-rxe0},${ZL_RDMA_DEV_B:-rxe1}}"
IFS=, read -r -a ips <<<"${ZL_RDMA_IPS:-${ZL_RDMA_IP_A:-10.0.0.1},${ZL_RDMA_IP_B:-10.0.0.2}}"
gid=${ZL_RDMA_GID_INDEX:-1}
iters=${SMOKE_ITERS:-1000}
n=${#devs[@]}

echo "== ibv_devices"
ibv_devices
for d in "${devs[@]}"; do
	echo "== ibv_devinfo -d $d"
	ibv_devinfo -d "$d"
done

tx_packets() { cat "/sys/class/net/veth$1/statistics/tx_packets"; }
rxe_count() { cat "/sys/class/infiniband/${devs[$1]}/ports/1/hw_counters/$2"; }

# client a -> server b (indexes); -x: RoCE v2 IPv4-mapped GID; -F: TCG's CPU
# MHz differs from the TSC.
pair() {
	local a=$1 b=$2 k crc=0 src=0 server before=() after=() sent rcvd
	for ((k = 0; k < n; k++)); do before[k]=$(tx_packets "$k"); done
	sent=$(rxe_count "$a" sent_pkts) rcvd=$(rxe_count "$b" rcvd_pkts)
	echo "== ib_write_lat ${devs[b]} (server) <- ${devs[a]} (client), $iters iterations"
	ib_write_lat -d "${devs[b]}" -x "$gid" -F -n "$iters" >/tmp/server.log 2>&1 &
	server=$!
	sleep 1 # the server must be listening before the client connects
	timeout 120 ib_write_lat -d "${devs[a]}" -x "$gid" -F -n "$iters" "${ips[b]}" || crc=$?
	[ "$crc" = 0 ] || kill "$server" 2>/dev/null || true
	wait "$server" || src=$?
	if [ "$crc" != 0 ] || [ "$src" != 0 ]; then
		echo "== server output"
		cat /tmp/server.log
		echo "smoke: FAILED (ib_write_lat client exit $crc, server exit $src)"
		exit 1
	fi
	for ((k = 0; k < n; k++)); do after[k]=$(($(tx_packets "$k") - before[k])); done
	sent=$(($(rxe_count "$a" sent_pkts) - sent)) rcvd=$(($(rxe_count "$b" rcvd_pkts) - rcvd))
	echo "== veth0..$((n - 1)) sent ${after[*]} packets; ${devs[a]} sent $sent, ${devs[b]} received $rcvd"
	# RoCE traffic must really cross the veths (not short-circuit through
	# lo), each device's on its own veth, none on a bystander's
	for ((k = 0; k < n; k++)); do
		if [ "$k" = "$a" ] || [ "$k" = "$b" ]; then
			[ "${after[k]}" -ge "$iters" ] && continue
		else
			[ "${after[k]}" -lt $((iters / 10)) ] && continue
		fi
		echo "smoke: FAILED (veth$k sent ${after[k]} packets)"
		exit 1
	done
	if [ "$sent" -lt "$iters" ] || [ "$rcvd" -lt "$iters" ]; then
		echo "smoke: FAILED (the rxe counters did not move)"
		exit 1
	fi
}

pair 0 1
for ((i = 1; n > 2 && i < n; i++)); do pair "$i" $(((i + 1) % n)); done
echo "smoke: OK ($n devices)"
