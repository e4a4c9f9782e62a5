/* SPDX-License-Identifier: MIT */
/* Shared by the benchmark tools: is gnuplot there to draw the PNGs? */
#ifndef ZL_TOOLS_GNUPLOT_H
#define ZL_TOOLS_GNUPLOT_H

/* 1 if an executable "gnuplot" is on PATH. */
int have_gnuplot(void);

#endif
