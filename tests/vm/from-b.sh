#!/bin/bash
# SPDX-License-Identifier: MIT
# from-b.sh add|del, inside the Soft-RoCE VM: this host's connections to
# ZL_RDMA_IP_A that bind no source address (redis-cli, pgbench, rsockets'
# clients) go out veth1 from ZL_RDMA_IP_B, as if from the other host, and
# rdma_cm resolves them to rxe1.
A=${ZL_RDMA_IP_A:?run this inside tests/vm/rdma-vm.sh} C=${ZL_RDMA_IP_B:?}
case ${1:-} in
add) ip route add "$A/32" dev veth1 src "$C" table 12 && ip rule add pref 5 to "$A" iif lo lookup 12 ;;
del) ip rule del pref 5; ip route flush table 12 ;;
*) echo "usage: from-b.sh add|del" >&2; exit 2 ;;
esac
