/* SPDX-License-Identifier: MIT */
/* --png: latency bars per operation through gnuplot (optional). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ycsb.h"
#include "gnuplot.h"

int plot_png(const struct opts *o, const struct phase_result *const *r,
	     struct lat_stats *const *st, int nphases)
{
	FILE *g;
	int rc = gnuplot_open(&g);
	if (rc)
		return rc;
	char desc[160], title[512];
	int n = 0;
	workload_describe(&o->w, desc, sizeof(desc));
	n = snprintf(title, sizeof(title), "zl-ycsb %s: workload %c (%s), %d thread%s, %u x %u B",
		     o->label ? o->label : o->url, o->w.name, desc, o->threads,
		     o->threads == 1 ? "" : "s", o->w.fieldcount, o->w.fieldlength);
	for (int p = 0; p < nphases; p++)
		n += snprintf(title + n, sizeof(title) - (size_t)n, "%s%s %.0f ops/s", p ? ", " : "\\n",
			      r[p]->phase == PHASE_LOAD ? "load" : "run", st[p][OP_N].ops_per_s);
	fprintf(g, "set terminal pngcairo noenhanced size 1200,650 font 'sans,11'\n");
	fprintf(g, "set output '%s'\n", o->plot);
	fprintf(g, "$d << EOD\n");
	for (int p = 0; p < nphases; p++)
		for (int k = 0; k <= OP_N; k++) {
			const struct lat_stats *s = &st[p][k];
			if (!s->count)
				continue;
			fprintf(g, "\"%s %s\" %g %g %g %g\n", r[p]->phase == PHASE_LOAD ? "load" : "run",
				k == OP_N ? "OVERALL" : op_name[k], s->median_us, s->p99_us, s->p999_us,
				s->max_us);
		}
	fprintf(g, "EOD\n");
	fprintf(g, "set title \"%s\"\n", title);
	fprintf(g, "set style data histogram\nset style histogram clustered gap 1\n"
		   "set style fill solid 0.85 border -1\nset boxwidth 0.9\n"
		   "set logscale y\nset grid ytics mytics\nset format y '%%g'\n"
		   "set ylabel 'latency per operation, us (log scale)'\n"
		   "set key top left\nset xtics rotate by -20\n");
	fprintf(g, "plot $d using 2:xtic(1) title 'median' lc rgb '#1b9e77', "
		   "'' using 3 title 'p99' lc rgb '#d95f02', "
		   "'' using 4 title 'p99.9' lc rgb '#7570b3', "
		   "'' using 5 title 'max' lc rgb '#999999'\n");
	return pclose(g) == 0 ? 0 : -1;
}
