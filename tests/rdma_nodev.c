/* SPDX-License-Identifier: MIT */
/*
 * rdma_nodev: on a host where libibverbs finds no RDMA device, rdma://
 * fails with -ENODEV at once: zl_listen (it listened without a word) and
 * zl_connect (it crashed in the device lookup, freeing a NULL list), also
 * with a plain TCP listener on the address. Skipped (77) where a device
 * exists; built only with the transport.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <zipline.h>

int main(void)
{
	zl_listener *l = NULL;
	zl_channel *ch = NULL;
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (list)
		ibv_free_device_list(list);
	if (n > 0) {
		printf("skip: this host has an RDMA device\n");
		return 77;
	}
	int rc = zl_listen("rdma://127.0.0.1:0", NULL, &l);
	if (rc == 0)
		zl_listener_close(l);
	if (rc != -ENODEV) {
		fprintf(stderr, "rdma_nodev: zl_listen = %s, want -ENODEV\n", zl_strerror(rc));
		return 1;
	}
	/* a TCP listener where the rdma side channel would be */
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof a;
	if (s < 0 || bind(s, (struct sockaddr *)&a, len) || listen(s, 4) ||
	    getsockname(s, (struct sockaddr *)&a, &len)) {
		perror("rdma_nodev: listener");
		return 1;
	}
	char url[64];
	snprintf(url, sizeof url, "rdma://127.0.0.1:%u", ntohs(a.sin_port));
	rc = zl_connect(url, NULL, 1000000, &ch);
	close(s);
	if (rc != -ENODEV) {
		fprintf(stderr, "rdma_nodev: zl_connect(%s) = %s, want -ENODEV\n", url,
			zl_strerror(rc));
		return 1;
	}
	printf("rdma_nodev: zl_listen and zl_connect on rdma:// without a device: -ENODEV\n");
	return 0;
}
