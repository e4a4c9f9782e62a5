/* SPDX-License-Identifier: MIT */
/*
 * Co-tenant load check. On a small shared VM, another busy process turns
 * spin-polling into millisecond stalls, so every measurement says whether
 * somebody else used the CPUs meanwhile: total busy jiffies from /proc/stat
 * minus the CPU time of our own processes (/proc/PID/stat).
 *
 * irq/softirq jiffies are left out on purpose: loopback TCP runs its
 * receive path in softirq context on behalf of our own processes, and with
 * IRQ time accounting that time is not charged to them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zl-bench.h"

static void read_proc_stat(uint64_t *busy, uint64_t *steal)
{
	unsigned long long user = 0, nice = 0, sys = 0, idle = 0, iow = 0, irq = 0, sirq = 0,
			   st = 0;
	*busy = *steal = 0;
	FILE *f = fopen("/proc/stat", "r");
	if (!f)
		return;
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idle,
		   &iow, &irq, &sirq, &st) >= 3) {
		*busy = user + nice + sys; /* guest time is included in user */
		*steal = st;
	}
	fclose(f);
}

/* utime + stime of one process (all its threads), in clock ticks. */
static uint64_t proc_cpu(pid_t pid)
{
	char path[64], buf[1024];
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/stat");
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* comm may contain spaces and parentheses: skip to the last ')' */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	unsigned long long ut = 0, stm = 0;
	/* after ')': state(3) ... utime is field 14, stime field 15 */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &stm) != 2)
		return 0;
	return ut + stm;
}

void load_snap(struct load_snap *s, const pid_t *pids, int npids)
{
	s->own = 0;
	for (int i = 0; i < npids; i++)
		s->own += proc_cpu(pids[i]);
	read_proc_stat(&s->busy, &s->steal);
	s->ns = mono_ns();
}

int load_check(const struct load_snap *a, const struct load_snap *b)
{
	double hz = (double)sysconf(_SC_CLK_TCK);
	double wall = (double)(b->ns - a->ns) / 1e9 * hz; /* in jiffies of one CPU */
	double busy = (double)(b->busy - a->busy);
	double own = (double)(b->own - a->own);
	double other = busy - own;
	double steal = (double)(b->steal - a->steal);
	int warned = 0;
	if (wall <= 0)
		return 0;
	if (getenv("ZL_BENCH_DEBUG"))
		printf("load: wall %.1f jiffies/CPU, busy %.0f, ours %.0f, other %.0f, steal %.0f\n",
		       wall, busy, own, other, steal);
	/* Jiffies are 10 ms samples and the two sources round differently:
	 * demand at least 3 jiffies beyond our own time before accusing
	 * anyone, so short runs are only flagged for gross interference. */
	if (other >= 3.0 && other > 0.10 * wall) {
		printf("WARNING: other processes used ~%.0f%% of a CPU meanwhile (co-tenant "
		       "load): numbers above may be inflated\n",
		       100.0 * other / wall);
		warned = 1;
	}
	if (steal >= 3.0 && steal > 0.10 * wall) {
		printf("WARNING: the hypervisor stole ~%.0f%% of a CPU meanwhile (load on "
		       "the host): numbers above may be inflated\n",
		       100.0 * steal / wall);
		warned = 1;
	}
	return warned;
}

double load_probe(int ms)
{
	struct load_snap a, b;
	pid_t self = 0;
	struct timespec d = {ms / 1000, (long)(ms % 1000) * 1000000L};
	load_snap(&a, &self, 1);
	nanosleep(&d, NULL);
	load_snap(&b, &self, 1);
	double wall = (double)(b.ns - a.ns) / 1e9 * (double)sysconf(_SC_CLK_TCK);
	double other = (double)(b.busy - a.busy) - (double)(b.own - a.own);
	return wall > 0 && other > 0 ? other / wall : 0.0;
}
