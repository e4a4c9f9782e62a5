/* SPDX-License-Identifier: MIT */
/* prefork_test: pre-forked workers, as nginx or Apache run them. A client
 * opens two connections, so both offers are queued; worker A accepts the
 * first and takes both offers, worker B accepts the second as a kernel
 * socket; the client closes the second: B's read must see EOF at once (an
 * offer kept the client's socket open, so its close sent no FIN, until
 * offers held only what names their connection once it is connected).
 * Run with and without the preload (zl-run); exit 0 pass, 1 fail. */
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int gate[3][2];
static void pass(int g) { if (write(gate[g][1], "g", 1) != 1) _exit(3); }
static void await(int g) { char b; if (read(gate[g][0], &b, 1) != 1) _exit(3); }

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof a;
	int l = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(l, (void *)&a, sizeof a) || listen(l, 8) || getsockname(l, (void *)&a, &al))
		return perror("listen"), 2;
	for (int i = 0; i < 3; i++)
		if (pipe(gate[i]))
			return 2;
	pid_t cl = fork();
	if (cl == 0) { /* the client: two connections, both offers queued first */
		int s1 = socket(AF_INET, SOCK_STREAM, 0), s2 = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(s1, (void *)&a, sizeof a) || connect(s2, (void *)&a, sizeof a))
			_exit(2);
		pass(0);
		await(2); /* B has connection 2 */
		close(s2);
		pause();
	}
	pid_t wa = fork();
	if (wa == 0) { /* worker A: one accept, then busy elsewhere */
		await(0);
		int c = accept(l, NULL, NULL);
		(void)c;
		pass(1);
		pause();
	}
	/* worker B (this process) */
	await(1);
	int c = accept(l, NULL, NULL);
	pass(2);
	struct pollfd p = { c, POLLIN, 0 };
	int r = poll(&p, 1, 5000);
	char b;
	if (r == 1 && read(c, &b, 1) == 0)
		printf("ok: EOF\n");
	else
		printf("BUG: no EOF 5 s after the client closed its connection (poll %d)\n", r);
	kill(cl, SIGKILL);
	kill(wa, SIGKILL);
	while (wait(NULL) > 0)
		;
	return r == 1 ? 0 : 1;
}
