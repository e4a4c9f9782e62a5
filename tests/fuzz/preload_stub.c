/* SPDX-License-Identifier: MIT */
/* The preload's entry points for its fuzz targets: the real libc calls
 * (intercept.c finds them with dlsym; here they are libc's own) and the
 * settings intercept.c would read from the environment. */
#include <fcntl.h>
#include <sys/sendfile.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "fuzz_preload.h"
#include "preload.h"

struct zp_real zp_real;
int zp_spin_us;
uint32_t zp_ring = 4096;
bool zp_allow_other_uid;

void fuzz_preload_init(void)
{
	zp_real = (struct zp_real){
		.socket = socket, .connect = connect, .listen = listen, .accept4 = accept4,
		.close = close, .shutdown = shutdown, .read = read, .write = write,
		.readv = readv, .writev = writev, .recvmsg = recvmsg, .sendmsg = sendmsg,
		.recv = recv, .send = send, .poll = poll, .ppoll = ppoll,
		.epoll_ctl = epoll_ctl, .epoll_pwait = epoll_pwait, .fcntl = fcntl,
		.ioctl = ioctl, .dup = dup, .dup3 = dup3, .setsockopt = setsockopt,
		.getsockopt = getsockopt, .splice = splice, .sendfile = sendfile,
	};
}
