/* SPDX-License-Identifier: MIT */
/* attack_lib.c - see attack.h. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "attack.h"

socklen_t addr_of(int fam, uint16_t port, const char *path, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof *ss);
	if (fam == AF_UNIX) {
		struct sockaddr_un *u = (void *)ss;
		u->sun_family = AF_UNIX;
		snprintf(u->sun_path, sizeof u->sun_path, "%s", path);
		return sizeof *u;
	}
	struct sockaddr_in *a = (void *)ss;
	a->sin_family = AF_INET;
	a->sin_port = htons(port);
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return sizeof *a;
}

/* the rendezvous name of a target, for connect or bind */
socklen_t rdv_name(int fam, uint16_t port, const char *path, struct sockaddr_un *u)
{
	char key[100];
	struct stat st;
	if (fam == AF_UNIX && !stat(path, &st))
		snprintf(key, sizeof key, "unix/%llx-%llx", (unsigned long long)st.st_dev,
			 (unsigned long long)st.st_ino);
	else
		snprintf(key, sizeof key, "tcp/%u", port);
	memset(u, 0, sizeof *u);
	u->sun_family = AF_UNIX;
	int k = snprintf(u->sun_path + 1, sizeof u->sun_path - 1, "zipline-preload/%s", key);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)k);
}

uint64_t ino_of(int fd)
{
	struct stat st;
	return fstat(fd, &st) ? 0 : (uint64_t)st.st_ino;
}
