/* SPDX-License-Identifier: MIT */
/* halfclose_test: a client that half-closes (shutdown(SHUT_WR)) before the
 * server has accepted, then reads a response longer than the ring, gets
 * all of it (the server once took the kernel stream's end, sent before the
 * client's switch, for the client's death, and its write failed with
 * EPIPE). Run with and without the preload (zl-run); exit 0 pass. */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define RESP (4 << 20)

int main(void)
{
	static char buf[RESP];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof a;
	int l = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(l, (void *)&a, sizeof a) || listen(l, 8) || getsockname(l, (void *)&a, &al))
		return perror("listen"), 2;
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IONBF, 0);
	if (fork() == 0) { /* the client: request, half-close, then read it all */
		int s = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(s, (void *)&a, sizeof a) || write(s, "GET", 3) != 3 || shutdown(s, SHUT_WR))
			_exit(2);
		usleep(500000); /* busy for a while: the server's ring fills */
		long got = 0;
		ssize_t r;
		while ((r = read(s, buf, 65536)) > 0) { /* a slow reader */
			got += r;
			usleep(2000);
		}
		printf("%s: %ld bytes%s\n", got == RESP ? "ok" : "BUG", got,
		       got == RESP ? "" : " (truncated response)");
		_exit(got != RESP);
	}
	usleep(100000); /* the server is slow to accept: the FIN is there first */
	int fd = accept(l, NULL, NULL);
	char req[3];
	if (read(fd, req, 3) != 3 || read(fd, req, 1) != 0)
		return 2;
	struct rusage r0, r1;
	getrusage(RUSAGE_SELF, &r0);
	long done = 0;
	ssize_t w = 0;
	while (done < RESP && (w = write(fd, buf, RESP - done)) > 0)
		done += w;
	getrusage(RUSAGE_SELF, &r1);
	double cpu = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) + (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
		     ((r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) + (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec)) / 1e6;
	printf("server: wrote %ld of %d bytes (%s), %.2f s CPU while writing\n", done, RESP,
	       w < 0 ? strerror(errno) : "done", cpu);
	close(fd);
	int st;
	wait(&st);
	return st != 0;
}
