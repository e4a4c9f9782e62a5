/* SPDX-License-Identifier: MIT */
/* The compare chart, drawn by gnuplot (optional: no gnuplot, no PNG). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "zl-bench.h"
#include "gnuplot.h"

/* zipline: solid lines, filled points; references: dashed, open points;
 * the floor: a black dashed line without points. */
static void style(FILE *g, const struct plot_series *s, int k)
{
	static const char *colors[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a",
				       "#66a61e", "#e6ab02", "#a6761d", "#666666"};
	if (s->flat)
		fprintf(g, "with lines dt 2 lw 2 lc rgb 'black'");
	else
		fprintf(g, "with linespoints lw 2 ps 1.3 dt %s pt %d lc rgb '%s'", s->ref ? "(7,4)" : "1",
			s->ref ? 6 : 7, colors[k % 8]);
}

/* One panel: column 2 (median) or 3 (p99) of every data block;
 * col 0 draws nothing but the legend entries. */
static void panel(FILE *g, const struct plot_series *s, int ns, int col)
{
	fprintf(g, "plot ");
	for (int k = 0; k < ns; k++) {
		if (col)
			fprintf(g, "%s$d%d using 1:%d ", k ? ", \\\n     " : "", k, col);
		else
			fprintf(g, "%sNaN ", k ? ", \\\n     " : "");
		style(g, &s[k], k);
		fprintf(g, " title '%s'", s[k].label);
	}
	fprintf(g, "\n");
}

int plot_png(const char *path, const struct plot_series *s, int ns, const size_t *sizes,
	     int nsizes)
{
	FILE *g;
	int r = gnuplot_open(&g);
	if (r)
		return r;
	struct utsname u;
	char when[64] = "";
	time_t now = time(NULL);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M", localtime(&now));
	if (uname(&u))
		snprintf(u.nodename, sizeof(u.nodename), "?");
	/* size 0 cannot sit on a log axis: draw it at 1 */
	double xmin = 1e300, xmax = 0;
	for (int i = 0; i < nsizes; i++) {
		double x = sizes[i] ? (double)sizes[i] : 1;
		xmin = x < xmin ? x : xmin;
		xmax = x > xmax ? x : xmax;
	}
	if (xmax <= xmin)
		xmax = xmin * 2;

	fprintf(g, "set encoding utf8\n");
	/* noenhanced: labels like ucp_am_lat must not turn into subscripts */
	fprintf(g, "set terminal pngcairo noenhanced size 1500,760 font 'sans,11'\n");
	fprintf(g, "set output '%s'\n", path);
	for (int k = 0; k < ns; k++) { /* inline data: size, median, p99 */
		fprintf(g, "$d%d << EOD\n", k);
		if (s[k].flat) { /* size-independent: a line across the chart */
			for (int e = 0; e < 2; e++)
				fprintf(g, "%g %g %g\n", e ? xmax * 1.3 : xmin / 1.3,
					s[k].res[0].median_us, s[k].res[0].p99_us);
		} else {
			for (int i = 0; i < s[k].n; i++)
				if (s[k].res[i].valid)
					fprintf(g, "%g %g %g\n",
						s[k].res[i].size ? (double)s[k].res[i].size : 1.0,
						s[k].res[i].median_us, s[k].res[i].p99_us);
		}
		fprintf(g, "EOD\n");
	}
	fprintf(g, "set multiplot title \"zipline ping-pong: round-trip time (RTT) by message "
		   "size -- lower is better\\n%s, %s; one message in flight; client and server "
		   "pinned to different CPUs\" font 'sans,13'\n",
		u.nodename, when);
	fprintf(g, "set logscale xy\nset grid xtics ytics mytics\n");
	fprintf(g, "set xrange [%g:%g]\n", xmin / 1.3, xmax * 1.3);
	fprintf(g, "set format y '%%g'\nset xlabel 'message size (bytes)'\n");
	fprintf(g, "set ylabel 'RTT, µs (log scale)'\n");
	fprintf(g, "set xtics (");
	for (int i = 0; i < nsizes; i++)
		fprintf(g, "%s'%zu' %g", i ? ", " : "", sizes[i], sizes[i] ? (double)sizes[i] : 1.0);
	fprintf(g, ")\n");
	/* Two panels side by side, and a third, empty one underneath that
	 * only holds the shared legend (a key cannot be wider than its plot). */
	fprintf(g, "set tmargin at screen 0.88\nset bmargin at screen 0.22\nunset key\n");
	fprintf(g, "set lmargin at screen 0.06\nset rmargin at screen 0.48\n");
	fprintf(g, "set title 'median RTT'\n");
	panel(g, s, ns, 2);
	fprintf(g, "set lmargin at screen 0.56\nset rmargin at screen 0.98\n");
	fprintf(g, "set title 'p99 RTT (the tail; noisy on a shared machine)'\n");
	panel(g, s, ns, 3);
	fprintf(g, "set tmargin at screen 0.13\nset bmargin at screen 0.01\n"
		   "set lmargin at screen 0.06\nset rmargin at screen 0.98\n"
		   "unset title\nunset xlabel\nunset ylabel\nunset border\nunset tics\n"
		   "unset grid\nunset logscale\nset xrange [0:1]\nset yrange [0:1]\n");
	fprintf(g, "set key center center horizontal maxrows %d Left reverse width 2 box\n",
		(ns + 2) / 3);
	panel(g, s, ns, 0);
	fprintf(g, "unset multiplot\n");
	int st = pclose(g);
	return st == 0 ? 0 : -1;
}
